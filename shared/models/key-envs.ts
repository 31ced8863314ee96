import { ModelKeyEnvs } from "../runtime/config.js";

/** What MODEL_KEY_ENVS allows when it is not set: variables named like a key, `*_API_KEY`. */
export const DEFAULT_MODEL_KEY_ENVS: readonly string[] = ["*_API_KEY"];

/** The patterns an actor's environment sets (MODEL_KEY_ENVS), or the default. */
export function keyEnvPatterns(env: Readonly<Record<string, string | undefined>>): readonly string[] {
  const set = env.MODEL_KEY_ENVS;
  if (set === undefined || set.trim() === "") return DEFAULT_MODEL_KEY_ENVS;
  const parsed = ModelKeyEnvs.safeParse(set);
  // An actor refuses to start with a malformed value (ActorEnv); nothing then is allowed here.
  return parsed.success ? parsed.data : [];
}

function matches(pattern: string, name: string): boolean {
  const regex = new RegExp(`^${pattern.replaceAll("*", "[A-Za-z0-9_]*")}$`);
  return regex.test(name);
}

/**
 * Why a model may not read its key from `name`, or undefined when it may: the variable must match
 * one of `patterns`. A key is read from the worker's (or critic's) environment by the name a spec
 * gives and sent to the spec's endpoint, so without this a spec could have any variable of that
 * environment sent anywhere.
 */
export function keyEnvRefusal(name: string, patterns: readonly string[]): string | undefined {
  if (patterns.some((p) => matches(p, name))) return undefined;
  return `apiKeyEnv '${name}' is not a variable this cluster keeps model keys in (MODEL_KEY_ENVS: ${patterns.join(",") || "none"}); name one that is, or allow it in MODEL_KEY_ENVS on the agent and critic`;
}
