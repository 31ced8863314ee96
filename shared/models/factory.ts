import type { PrivacyTier } from "../contracts/capability.js";
import type { ActorModelRef, ModelRef } from "../contracts/model.js";
import { AgentError } from "../runtime/errors.js";
import { AnthropicDriver } from "./anthropic.js";
import type { ModelDriver } from "./driver.js";
import type { HttpDeps, HttpPolicy } from "./http.js";
import { OpenAiDriver } from "./openai.js";
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

/** Builds the driver a ModelRef names; the sovereign tier refuses any driver that leaves the machine. */
export function createDriver(ref: ModelRef, privacy: PrivacyTier, deps: DriverFactoryDeps): ModelDriver {
  const driver = build(ref, deps);
  if (privacy === "sovereign" && driver.locality === "remote") {
    throw new AgentError(
      "PRIVACY_DENIED",
      `model '${driver.id}' is remote, which privacy tier 'sovereign' forbids; use a local endpoint or another tier`,
    );
  }
  return driver;
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
