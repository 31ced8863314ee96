import { PolicyName } from "../contracts/run-spec.js";
import { AgentError } from "../runtime/errors.js";
import { isBuiltinPolicy, type ConvergencePolicy, type RegisteredPolicies } from "./policy.js";

/**
 * The policies an operator registers in an agent worker, checked once at start: each a valid
 * RunSpec `policy` name, none a built-in's (a spec's `gates` must mean the same on every worker),
 * none twice. A worker that cannot register them does not start.
 */
export function registerPolicies(policies: readonly unknown[]): RegisteredPolicies {
  const registered = new Map<string, ConvergencePolicy>();
  for (const policy of policies) {
    if (!isPolicy(policy))
      throw new AgentError(
        "INVALID_INPUT",
        "a registered policy is an object { name: string, evaluate(view) → { converged, reason } }",
      );
    const { name } = policy;
    if (!PolicyName.safeParse(name).success)
      throw new AgentError(
        "INVALID_INPUT",
        `policy name '${name}' is not 1-64 of A-Za-z0-9_.- starting with a letter`,
      );
    if (isBuiltinPolicy(name))
      throw new AgentError("INVALID_INPUT", `policy '${name}' is built in: register it under another name`);
    if (registered.has(name)) throw new AgentError("INVALID_INPUT", `policy '${name}' is registered twice`);
    registered.set(name, policy);
  }
  return registered;
}

function isPolicy(value: unknown): value is ConvergencePolicy {
  if (typeof value !== "object" || value === null) return false;
  const { name, evaluate } = value as Partial<ConvergencePolicy>;
  return typeof name === "string" && typeof evaluate === "function";
}
