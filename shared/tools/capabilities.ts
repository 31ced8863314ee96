import type { CapabilityObject, PrivacyTier, RequiredCapability } from "../contracts/capability.js";
import { AgentError } from "../runtime/errors.js";

const wildcard = (pattern: string, value: string | undefined): boolean =>
  pattern === "*" || (value !== undefined && pattern === value);

/** The manifest capability that grants what a tool requires, or undefined when none does. */
export function findGrant(
  granted: readonly CapabilityObject[],
  required: RequiredCapability,
): CapabilityObject | undefined {
  return granted.find((cap) => {
    if (cap.kind !== required.kind) return false;
    if (cap.kind === "mcp") return wildcard(cap.server, required.server) && wildcard(cap.tool, required.tool);
    return true;
  });
}

/**
 * Whether an agent may run a tool at all: the capability must be granted, and the sovereign tier
 * refuses network egress even when it is (defence in depth: a grant never overrides privacy).
 */
export function authorizeTool(
  toolName: string,
  required: RequiredCapability,
  granted: readonly CapabilityObject[],
  privacy: PrivacyTier,
): CapabilityObject {
  const grant = findGrant(granted, required);
  if (!grant) {
    throw new AgentError(
      "CAPABILITY_DENIED",
      `tool '${toolName}' requires capability '${required.kind}', which the agent manifest does not grant`,
    );
  }
  if (privacy === "sovereign" && required.kind === "network") {
    throw new AgentError(
      "PRIVACY_DENIED",
      `tool '${toolName}' needs network egress, which privacy tier 'sovereign' forbids`,
    );
  }
  return grant;
}

/** Host allowlist: exact host names (case-insensitive) or "*" for any. */
export function hostAllowed(allowedHosts: readonly string[], host: string): boolean {
  const wanted = host.toLowerCase();
  return allowedHosts.some((allowed) => allowed === "*" || allowed.toLowerCase() === wanted);
}

export function assertHostAllowed(allowedHosts: readonly string[], url: URL): void {
  if (!hostAllowed(allowedHosts, url.hostname)) {
    throw new AgentError("HOST_NOT_ALLOWED", `host '${url.hostname}' is not in allowed_hosts`);
  }
}
