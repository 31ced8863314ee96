import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { AgentError } from "./errors.js";

/**
 * The policies AGENT_POLICY_MODULES names (a worker's, or `agentctl replay --policy-modules`):
 * each module's `policies` export (or its default export), an array. Left unchecked here:
 * registerPolicies checks what they hold. A module that cannot be loaded is an error naming it.
 */
export async function loadPolicyModules(modules: readonly string[], cwd: string): Promise<unknown[]> {
  const loaded: unknown[] = [];
  for (const module of modules) {
    const url = module.startsWith("file:")
      ? module
      : pathToFileURL(isAbsolute(module) ? module : resolve(cwd, module)).href;
    let exported: { policies?: unknown; default?: unknown };
    try {
      exported = (await import(url)) as { policies?: unknown; default?: unknown };
    } catch (cause) {
      throw new AgentError("INVALID_INPUT", `AGENT_POLICY_MODULES: module '${module}' could not be loaded`, {
        cause,
      });
    }
    const policies = exported.policies ?? exported.default;
    if (!Array.isArray(policies))
      throw new AgentError(
        "INVALID_INPUT",
        `AGENT_POLICY_MODULES: module '${module}' exports no array 'policies' (nor a default array)`,
      );
    loaded.push(...(policies as unknown[]));
  }
  return loaded;
}
