import type { CapabilityObject, PrivacyTier } from "../contracts/capability.js";
import type { RunSpec } from "../contracts/run-spec.js";
import { AgentError } from "../runtime/errors.js";

/** From the tier that lets the least out to the one that lets the most. */
const PRIVACY_RANK: Record<PrivacyTier, number> = { sovereign: 0, private: 1, standard: 2 };

/** Whether a granted list (`*`: anything) covers every entry asked for. */
function listCovers(granted: readonly string[], asked: readonly string[], caseless = false): boolean {
  const same = (g: string, a: string): boolean => (caseless ? g.toLowerCase() === a.toLowerCase() : g === a);
  return asked.every((a) => granted.some((g) => g === "*" || same(g, a)));
}

const one = (granted: string, asked: string): boolean => granted === "*" || granted === asked;

/** Whether one of the parent's grants covers a grant asked for a child. */
function covers(parent: CapabilityObject, child: CapabilityObject): boolean {
  switch (child.kind) {
    case "network":
      return parent.kind === "network" && listCovers(parent.allowedHosts, child.allowedHosts, true);
    case "shell":
      return parent.kind === "shell" && listCovers(parent.allowedCommands, child.allowedCommands);
    case "fileRead":
    case "fileWrite":
      return parent.kind === child.kind && listCovers(parent.allowedPaths, child.allowedPaths);
    case "spawn":
      return parent.kind === "spawn" && child.maxDepth <= parent.maxDepth;
    case "mcp":
      return parent.kind === "mcp" && one(parent.server, child.server) && one(parent.tool, child.tool);
    default:
      return parent.kind === child.kind;
  }
}

function grantText(grant: CapabilityObject): string {
  const { kind, ...rest } = grant;
  return Object.keys(rest).length === 0 ? kind : `${kind} ${JSON.stringify(rest)}`;
}

/**
 * Why a spawned child may not be given what its spec asks, or undefined when it may. A child gets
 * no more than its parent has: only tools its parent may call, grants its parent's cover (hosts,
 * commands and paths among its parent's, a depth no deeper, the same MCP server and tool), and a
 * privacy tier no less strict. The child's spec is the parent model's output: without this, a
 * parent granted `spawn` could give a child any tool or grant (a network host, a payment tool, a
 * hosted model) and reach, through it, what its own manifest refused it.
 */
export function childGrantRefusal(parent: RunSpec, child: RunSpec): AgentError | undefined {
  const p = parent.agent;
  const c = child.agent;
  const tools = c.tools.filter((t) => !listCovers(p.tools, [t]));
  if (tools.length > 0) {
    return new AgentError(
      "CAPABILITY_DENIED",
      `a child may be given only tools its parent may call; not: ${tools.join(", ")}`,
    );
  }
  const grants = c.capabilities.filter((g) => !p.capabilities.some((pg) => covers(pg, g)));
  if (grants.length > 0) {
    return new AgentError(
      "CAPABILITY_DENIED",
      `a child may be granted only what its parent's capabilities cover; not: ${grants.map(grantText).join("; ")}`,
    );
  }
  if (PRIVACY_RANK[c.privacy] > PRIVACY_RANK[p.privacy]) {
    return new AgentError(
      "PRIVACY_DENIED",
      `a child's privacy tier may be no less strict than its parent's ('${p.privacy}'), not '${c.privacy}'`,
    );
  }
  return undefined;
}
