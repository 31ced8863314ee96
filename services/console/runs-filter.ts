/** Which runs the console's list shows: a filter on status, agent and runId, parsed from a query. Pure. */
import { z } from "zod";
import { type RunStatus, RunStatusValue } from "../../shared/contracts/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";

/** The most runs one listing returns (the most recently changed first). */
export const LIST_LIMIT = 200;

export const RunsQuery = z.object({
  /** Comma-separated statuses; absent or empty: every status. */
  status: z.string().optional(),
  agent: z.string().max(128).optional(),
  /** A part of the runId. */
  q: z.string().max(64).optional(),
});
export type RunsQuery = z.infer<typeof RunsQuery>;

export interface RunsFilter {
  statuses: ReadonlySet<RunStatusValue> | undefined;
  agent: string | undefined;
  q: string | undefined;
}

/** The filter a query asks for; INVALID_INPUT naming an unknown status. */
export function parseRunsFilter(query: Record<string, string | undefined>): RunsFilter {
  const parsed = RunsQuery.safeParse(query);
  if (!parsed.success)
    throw new AgentError(
      "INVALID_INPUT",
      `bad query: ${parsed.error.issues.map((i) => i.message).join("; ")}`,
    );
  const names = (parsed.data.status ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const statuses = names.map((name) => {
    const status = RunStatusValue.safeParse(name);
    if (!status.success)
      throw new AgentError(
        "INVALID_INPUT",
        `unknown status '${name}': one of ${RunStatusValue.options.join(", ")}`,
      );
    return status.data;
  });
  return {
    statuses: statuses.length > 0 ? new Set(statuses) : undefined,
    agent: parsed.data.agent?.trim() || undefined,
    q: parsed.data.q?.trim() || undefined,
  };
}

const byLastChange = (a: RunStatus, b: RunStatus): number =>
  Date.parse(b.updatedAt) - Date.parse(a.updatedAt) || a.runId.localeCompare(b.runId);

/** The runs a filter keeps, the most recently changed first; `agents` names each run's agent where known. */
export function filterRuns(
  statuses: readonly RunStatus[],
  agents: ReadonlyMap<string, string>,
  filter: RunsFilter,
): { runs: RunStatus[]; more: number } {
  const kept = statuses
    .filter((s) => !filter.statuses || filter.statuses.has(s.status))
    .filter((s) => !filter.q || s.runId.includes(filter.q))
    .filter((s) => !filter.agent || agents.get(s.runId) === filter.agent)
    .sort(byLastChange);
  return { runs: kept.slice(0, LIST_LIMIT), more: Math.max(0, kept.length - LIST_LIMIT) };
}
