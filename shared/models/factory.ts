import type { PrivacyTier } from "../contracts/capability.js";
import type { ActorModelRef, ModelRef } from "../contracts/model.js";
import { AgentError } from "../runtime/errors.js";
import { ANTHROPIC_DEFAULT_BASE_URL, ANTHROPIC_DEFAULT_KEY_ENV, AnthropicDriver } from "./anthropic.js";
import type { ModelDriver } from "./driver.js";
import type { HttpDeps, HttpPolicy } from "./http.js";
import { keyEnvPatterns, keyEnvRefusal } from "./key-envs.js";
import { isLoopbackUrl } from "./locality.js";
import { OPENAI_DEFAULT_BASE_URL, OPENAI_DEFAULT_KEY_ENV, OpenAiDriver } from "./openai.js";
import type { PriceTable } from "./pricing.js";
import { ScriptedDriver } from "./scripted.js";

export interface DriverFactoryDeps {
  env: Readonly<Record<string, string | undefined>>;
  prices: PriceTable;
  http: HttpDeps;
  policy?: HttpPolicy;
  /** Builds the driver of a model served by another actor (a NATS adapter, injected by the shell). */
  actor?: (ref: ActorModelRef) => ModelDriver;
}

/** Where each provider asked over HTTP is asked, and the variable its key is in, unless a ModelRef says. */
const HTTP_DEFAULTS = {
  openai: { baseUrl: OPENAI_DEFAULT_BASE_URL, keyEnv: OPENAI_DEFAULT_KEY_ENV },
  anthropic: { baseUrl: ANTHROPIC_DEFAULT_BASE_URL, keyEnv: ANTHROPIC_DEFAULT_KEY_ENV },
} as const;

/** Builds the driver a ModelRef names; the sovereign tier refuses any driver that leaves the machine. */
export function createDriver(ref: ModelRef, privacy: PrivacyTier, deps: DriverFactoryDeps): ModelDriver {
  const refused = privacyRefusal(ref, privacy);
  if (refused) throw new AgentError("PRIVACY_DENIED", refused);
  const keyRefused = keyRefusal(ref, deps.env);
  if (keyRefused) throw new AgentError("MODEL_KEY_DENIED", keyRefused);
  return build(ref, deps);
}

/**
 * Why the model may not read its key from the variable its ModelRef names (see keyEnvRefusal);
 * the providers' own variables (OPENAI_API_KEY…) are always allowed.
 */
function keyRefusal(ref: ModelRef, env: DriverFactoryDeps["env"]): string | undefined {
  if (ref.provider !== "openai" && ref.provider !== "anthropic") return undefined;
  const named = ref.apiKeyEnv;
  if (named === undefined || named === HTTP_DEFAULTS[ref.provider].keyEnv) return undefined;
  return keyEnvRefusal(named, keyEnvPatterns(env));
}

/**
 * Why `privacy` forbids the model, undefined when it allows it: the sovereign tier keeps data on
 * this machine, so an HTTP endpoint that is not on loopback is refused. Known from the spec alone,
 * so the supervisor refuses such a run at its submit, not at its first model call.
 */
export function privacyRefusal(ref: ModelRef, privacy: PrivacyTier): string | undefined {
  if (privacy !== "sovereign") return undefined;
  const endpoint = modelEndpoint(ref);
  if (endpoint === undefined || isLoopbackUrl(endpoint.baseUrl)) return undefined;
  return `model '${endpoint.provider}:${endpoint.model}' is remote (${endpoint.baseUrl}), which privacy tier 'sovereign' (the default) forbids; set agent.privacy to 'private' or 'standard', or use a loopback baseUrl`;
}

/** Where a model asked over HTTP is asked, and the environment variable that holds its key. */
export interface ModelEndpoint {
  provider: "openai" | "anthropic";
  model: string;
  baseUrl: string;
  keyEnv: string;
}

/** A model's endpoint, its defaults filled in; undefined for one not asked over HTTP (scripted, actor). */
export function modelEndpoint(ref: ModelRef): ModelEndpoint | undefined {
  if (ref.provider !== "openai" && ref.provider !== "anthropic") return undefined;
  const defaults = HTTP_DEFAULTS[ref.provider];
  return {
    provider: ref.provider,
    model: ref.model,
    baseUrl: ref.baseUrl ?? defaults.baseUrl,
    keyEnv: ref.apiKeyEnv ?? defaults.keyEnv,
  };
}

function build(ref: ModelRef, deps: DriverFactoryDeps): ModelDriver {
  const common = {
    env: deps.env,
    prices: deps.prices,
    http: deps.http,
    ...(deps.policy ? { policy: deps.policy } : {}),
  };
  switch (ref.provider) {
    case "scripted":
      return new ScriptedDriver(ref, deps.http.clock);
    case "openai":
      return new OpenAiDriver({ ref, ...common });
    case "anthropic":
      return new AnthropicDriver({ ref, ...common });
    case "actor":
      if (!deps.actor)
        throw new AgentError(
          "MODEL_REJECTED",
          `model actor '${ref.name}' cannot be reached from here: this process has no bus for model actors`,
        );
      return deps.actor(ref);
  }
}
