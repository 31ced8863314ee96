import {
  SIMPLE_CAPABILITY_KINDS,
  type CapabilityObject,
  type PrivacyTier,
  type RequiredCapability,
} from "../contracts/capability.js";
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

/**
 * The grant a tool service runs a call under: the one the call carries, or for parameterless
 * capabilities (compute, inference…) the bare kind. Allowlist kinds (network, shell, files, spawn,
 * mcp) need the caller's grant: without it the tool could not know what it may touch, so the call
 * is refused.
 */
export function callGrant(
  tool: { name: string; capability: RequiredCapability },
  grant: CapabilityObject | undefined,
): CapabilityObject {
  if (grant) {
    if (grant.kind !== tool.capability.kind) {
      throw new AgentError(
        "CAPABILITY_DENIED",
        `the call's grant is '${grant.kind}', tool '${tool.name}' needs capability '${tool.capability.kind}'`,
      );
    }
    return grant;
  }
  const kind = tool.capability.kind;
  if ((SIMPLE_CAPABILITY_KINDS as readonly string[]).includes(kind)) return { kind } as CapabilityObject;
  throw new AgentError(
    "CAPABILITY_DENIED",
    `tool '${tool.name}' needs the caller's '${kind}' capability grant, and the call carries none`,
  );
}

/**
 * Codes a tool refuses a call with, before doing anything, because its grant does not cover what
 * the call asked: the run's log records the call as `tool.denied`, not `tool.aborted`.
 */
export const TOOL_REFUSALS: ReadonlySet<string> = new Set(["PATH_NOT_ALLOWED", "COMMAND_NOT_ALLOWED"]);

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
