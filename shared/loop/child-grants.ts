import type { CapabilityObject, PrivacyTier } from "../contracts/capability.js";
import type { ModelRef } from "../contracts/model.js";
import { specModels, type RunSpec } from "../contracts/run-spec.js";
import { modelEndpoint, type ModelEndpoint } from "../models/factory.js";
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
      return (
        parent.kind === "mcp" &&
        one(parent.server, child.server) &&
        one(parent.tool, child.tool) &&
        (child.allowedPaths === undefined ||
          (parent.allowedPaths !== undefined && listCovers(parent.allowedPaths, child.allowedPaths)))
      );
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
 * commands and paths among its parent's, a depth no deeper, the same MCP server and tool with paths among its parent's), models
 * asked over HTTP only where and with the key its parent's are (see modelsBeyond), and a privacy
 * tier no less strict. The child's spec is the parent model's output: without this, a
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
  const models = modelsBeyond(parent, child);
  if (models.length > 0) {
    return new AgentError(
      "CAPABILITY_DENIED",
      `a child may ask a model over HTTP only at an endpoint, with a key, its parent's models use; not: ${models.join("; ")}`,
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

const modelsOf = (spec: RunSpec): ModelRef[] => specModels(spec).map(([, ref]) => ref);

const endpointText = (e: ModelEndpoint): string =>
  `${e.provider} at ${e.baseUrl} with the key in ${e.keyEnv}`;

/**
 * The child's models asked over HTTP at an endpoint, or with a key, none of its parent's models
 * use. A key is read from the worker's (or critic's) environment by the name the spec gives and sent
 * to the spec's endpoint: a child's spec is its parent model's output, which could otherwise send
 * any variable of that environment (the process's NATS password, another team's key) to any host.
 */
function modelsBeyond(parent: RunSpec, child: RunSpec): string[] {
  const known = modelsOf(parent).flatMap((m) => modelEndpoint(m) ?? []);
  return modelsOf(child)
    .flatMap((m) => modelEndpoint(m) ?? [])
    .filter(
      (e) =>
        !known.some((k) => k.provider === e.provider && k.baseUrl === e.baseUrl && k.keyEnv === e.keyEnv),
    )
    .map(endpointText);
}

/** The smaller of two limits, where `unlimited` (0 or absent, as the spec says) is the larger. */
function tighter(parent: number | undefined, child: number | undefined, unlimited: (v?: number) => boolean) {
  if (unlimited(parent)) return child;
  if (unlimited(child)) return parent;
  return Math.min(parent as number, child as number);
}

const absent = (v?: number): boolean => v === undefined;
const zeroOrAbsent = (v?: number): boolean => v === undefined || v === 0;

/**
 * A spawned child's spec with its spending no larger than its parent's: the child's cost and token
 * limits and its deadline are its own or its parent's, whichever is tighter (a limit the child
 * leaves unset, or unlimited, is its parent's). A parent limited to $1 otherwise spawned children
 * that could each spend without end. Iterations, tool calls and repairs are the child's own: an
 * orchestrator that spawns and answers needs few of its own, and the tree's iteration cap
 * (SUPERVISOR_TREE_ITERATION_CAP) bounds the whole tree's model calls.
 */
export function withinParentBudgets(parent: RunSpec, child: RunSpec): RunSpec {
  const p = parent.agent.resources;
  const c = child.agent.resources;
  const cost = tighter(p.maxCostUsd, c.maxCostUsd, zeroOrAbsent) ?? 0;
  const tokens = tighter(p.maxTokensBudget, c.maxTokensBudget, absent);
  const deadline = tighter(p.deadlineMs, c.deadlineMs, absent);
  const resources = {
    ...c,
    maxCostUsd: cost,
    ...(tokens === undefined ? {} : { maxTokensBudget: tokens }),
    ...(deadline === undefined ? {} : { deadlineMs: deadline }),
  };
  return { ...child, agent: { ...child.agent, resources } };
}

/** Whether a child's spec, as its parent's model wrote it, names a privacy tier. */
function namesPrivacy(asked: unknown): boolean {
  const agent = (asked as { agent?: { privacy?: unknown } } | undefined)?.agent;
  return agent?.privacy !== undefined;
}

/**
 * The spec a spawned child is submitted with: its spending bounded by its parent's (see
 * withinParentBudgets), and its privacy tier its parent's unless the model named one (`asked`: the
 * child's spec as the model wrote it). Parsed, a tier left out is the default, the strictest: a
 * parent on a hosted model spawning a child on the same model without naming a tier had the child
 * refused (PRIVACY_DENIED).
 */
export function childSpec(parent: RunSpec, child: RunSpec, asked: unknown): RunSpec {
  const bounded = withinParentBudgets(parent, child);
  const privacy = namesPrivacy(asked) ? child.agent.privacy : parent.agent.privacy;
  return { ...bounded, agent: { ...bounded.agent, privacy } };
}
