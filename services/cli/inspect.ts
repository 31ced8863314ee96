import { readFile } from "node:fs/promises";
import { z } from "zod";
import { ModelBreaker } from "../../shared/contracts/model-breaker.js";
import { isFinished, type RunStatus, type RunStatusValue } from "../../shared/contracts/run-status.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { readBucket } from "../../shared/bus/bucket-read.js";
import { decode } from "../../shared/bus/codec.js";
import { discoverTools } from "../../shared/bus/remote-tool.js";
import { auditTally } from "../../shared/bus/audit.js";
import { parentTakesNoResult } from "../../shared/bus/cancel-job.js";
import { readProgress, withProgress } from "../../shared/bus/run-progress.js";
import { readRunsBucket, RunStatusStore } from "../../shared/bus/run-status.js";
import { runTree } from "../../shared/bus/run-tree.js";
import { readLog } from "../../shared/bus/run-log.js";
import { type CheckpointReport, replay } from "../../shared/loop/replay.js";
import { SPAWN_AGENT_TOOL } from "../../shared/loop/saga.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { builtInTool } from "../../shared/tools/builtin/built-ins.js";
import { describeTool } from "../../shared/tools/tool.js";
import { type ModelReplay, replayModels } from "./model-replay.js";
import { isBuiltinPolicy, type RegisteredPolicies } from "../../shared/loop/policy.js";

export interface ReplayReport {
  runId: string;
  records: number;
  transitions: number;
  finalHash: string;
  status: string;
  phase: string;
  /** The log's checkpoints against the replay's (absent with `strict`: they were compared as records). */
  checkpoints?: CheckpointReport;
  /** With `models`: the model answers asked again (see replayModels). */
  models?: ModelReplay;
}

/**
 * Re-derives every transition of a run from its WAL (from the start, not from a checkpoint) and
 * checks each record the replay produces against the one on record: NONDETERMINISM on a mismatch.
 * Checkpoints are compared on their own and reported, not judged: they are never inputs, and a
 * run recorded by another version holds that version's (its state's shape, its cadence); with
 * `strict` they are compared like every other record. `checkpointEvery` is the workers'
 * `AGENT_CHECKPOINT_EVERY` (the replay writes checkpoints where they would). With `models`, also
 * asks the run's model again (when an actor serves it) for every answer.
 */
export async function replayRun(
  bus: ActorBus,
  runId: string,
  options: {
    models?: boolean;
    strict?: boolean;
    checkpointEvery?: number;
    /** The workers' registered policies: a run under one replays through it. */
    policies?: RegisteredPolicies;
  } = {},
): Promise<ReplayReport> {
  const read = await readLog(bus, runId);
  const records: WalRecord[] = read.records.map((r) => r.record);
  const first = records[0];
  if (first?.type !== "EVENT" || first.event.type !== "start") {
    throw new AgentError(
      "NOT_FOUND",
      records.length === 0 ? await whyNoWal(bus, runId) : `run '${runId}' has no WAL`,
    );
  }
  // Without its policy the replay would fail the run at its start and mismatch at the next record.
  const policy = first.event.spec.policy;
  if (policy !== undefined && !isBuiltinPolicy(policy) && !options.policies?.has(policy))
    throw new AgentError(
      "INVALID_INPUT",
      `run '${runId}' converges under policy '${policy}', registered in the workers: give their modules with --policy-modules (their AGENT_POLICY_MODULES)`,
    );
  // spawn_agent is no service's: the workers' own, described as they describe it, and so is a
  // built-in tool no service describes (the workers run it in-process: AGENT_LOCAL_TOOLS). In the
  // order a worker registers them (see registerRunTools).
  const names = first.event.spec.agent.tools;
  const asked = names.filter((name) => name !== SPAWN_AGENT_TOOL);
  const served = new Map((await discoverTools(asked, bus)).map((tool) => [tool.name, tool]));
  const order = names.includes(SPAWN_AGENT_TOOL) ? [...asked, SPAWN_AGENT_TOOL] : asked;
  const tools = order.flatMap((name) => {
    const tool = served.get(name) ?? builtInTool(name);
    return tool ? [tool] : [];
  });
  const replayed = replay(
    records,
    {
      tools: tools.map((t) => describeTool(t)),
      ...(options.checkpointEvery ? { checkpointEvery: options.checkpointEvery } : {}),
      ...(options.policies ? { policies: options.policies } : {}),
    },
    { snapshots: options.strict ? "strict" : "report" },
  );
  return {
    runId,
    records: records.length,
    transitions: replayed.transitions.length,
    finalHash: replayed.state.transitionHash,
    status: replayed.state.status,
    phase: replayed.state.phase,
    ...(replayed.checkpoints ? { checkpoints: replayed.checkpoints } : {}),
    ...(options.models
      ? {
          models: await replayModels(
            bus,
            first.event.spec.agent.model,
            records,
            replayed.modelRequests,
            first.event.spec.agent.escalationModel,
          ),
        }
      : {}),
  };
}

/** One line on how a run's checkpoints compare with the replay's. */
export function checkpointLine(report: CheckpointReport): string {
  const counts = `${report.onRecord} on record, ${report.replayed} replayed`;
  if (report.identical && report.onRecord === 0) return "checkpoints: none on record or replayed";
  if (report.identical) return `checkpoints: ${counts}, identical`;
  const first = report.firstDifference;
  const where = first?.record ? `record ${first.record}` : "one the log lacks";
  return (
    `checkpoints: ${counts}, the ${ordinal(first?.checkpoint ?? 0)} differs (${where}): not written as this build ` +
    `writes them (a run recorded by another version, its state's shape or cadence, or by workers ` +
    `with another AGENT_CHECKPOINT_EVERY: --checkpoint-every). Checkpoints are not inputs and ` +
    `every other record matched; --strict compares them too`
  );
}

function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : (["th", "st", "nd", "rd"][n % 10] ?? "th");
  return `${n}${suffix}`;
}

/** An open breaker, and how many unfinished runs say in their status that they wait on it. */
export type BreakerView = ModelBreaker & { waitingRuns: number };

/**
 * The model providers' breakers open now (or being tried), oldest first: the workers' shared view,
 * each with the runs it holds up (see waitingRuns). The runs bucket is read, in one streamed read,
 * only when some breaker is open.
 */
export async function openBreakers(bus: Pick<ActorBus, "jsm" | "subjects">): Promise<BreakerView[]> {
  // One streamed read (see readBucket): an outage rewrites its breaker every cooldown, and the
  // key listing this replaced could wait 30 s then.
  const breakers: ModelBreaker[] = [];
  for await (const { data } of readBucket(bus.jsm, bus.subjects.buckets().modelBreakers))
    breakers.push(decode(ModelBreaker, data));
  if (breakers.length === 0) return [];
  const waiting = waitingRuns((await readRunsBucket(bus)).statuses);
  return breakers
    .sort((a, b) => a.openedAt - b.openedAt)
    .map((breaker) => ({ ...breaker, waitingRuns: waiting.get(breaker.provider) ?? 0 }));
}

/**
 * Unfinished runs whose status says they wait on a provider's breaker, by provider: runs left
 * queued until the breaker lets a turn try, each holding its pool slot meanwhile.
 */
export function waitingRuns(statuses: readonly RunStatus[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const status of statuses) {
    const provider = status.waiting?.provider;
    if (provider === undefined || isFinished(status)) continue;
    counts.set(provider, (counts.get(provider) ?? 0) + 1);
  }
  return counts;
}

/** Which runs `agentctl runs` lists. */
export interface RunFilter {
  statuses: ReadonlySet<RunStatusValue>;
  /** Only this run and the runs under it (its children, theirs…). */
  root?: string;
  limit: number;
}

/** The statuses `agentctl runs` lists by default: every run not finished. */
export const UNFINISHED: ReadonlySet<RunStatusValue> = new Set([
  "queued",
  "running",
  "awaiting_approval",
  "halted",
]);

/** Of a run's children with a status, how many are in each status that is not finished. */
export type ChildrenGoing = Partial<Record<RunStatusValue, number>>;

/** The runs a `runs` listing shows, `more` it left out, and each one's children not finished. */
export interface RunsListing {
  runs: RunStatus[];
  more: number;
  /** By run id, for the listed runs that have any (a parent waits on them, or left them going). */
  children: Map<string, ChildrenGoing>;
  /**
   * By run id, for the listed halted runs whose parent can no longer take their result: why. Such a
   * run stays halted until an operator cancels it (a resume is refused).
   */
  orphans: Map<string, string>;
}

const byLastChange = (a: RunStatus, b: RunStatus): number =>
  Date.parse(b.updatedAt) - Date.parse(a.updatedAt) || a.runId.localeCompare(b.runId);

/** The runs a filter keeps, the most recently changed first, at most `limit`; `more`: those left out. */
export function selectRuns(statuses: readonly RunStatus[], filter: RunFilter): RunsListing {
  const { root } = filter;
  const tree = root === undefined ? statuses : runTree(root, statuses);
  const kept = tree.filter((s) => filter.statuses.has(s.status)).sort(byLastChange);
  const runs = kept.slice(0, filter.limit);
  const listed = new Set(runs.map((r) => r.runId));
  const children = new Map<string, ChildrenGoing>();
  for (const s of statuses) {
    if (s.parentRunId === undefined || !listed.has(s.parentRunId) || !UNFINISHED.has(s.status)) continue;
    const counts = children.get(s.parentRunId) ?? {};
    counts[s.status] = (counts[s.status] ?? 0) + 1;
    children.set(s.parentRunId, counts);
  }
  const byId = new Map(statuses.map((s) => [s.runId, s]));
  const orphans = new Map<string, string>();
  for (const run of runs) {
    if (run.status !== "halted" || run.parentRunId === undefined) continue;
    const why = parentTakesNoResult(run, byId.get(run.parentRunId));
    if (why) orphans.set(run.runId, why);
  }
  return { runs, more: Math.max(0, kept.length - filter.limit), children, orphans };
}

/**
 * The runs the cluster's status bucket holds that `filter` keeps (see selectRuns), in one streamed
 * read; a running run's progress is read from the end of its log (see withProgress).
 */
export async function listRuns(bus: ActorBus, filter: RunFilter): Promise<RunsListing> {
  const listing = selectRuns((await readRunsBucket(bus)).statuses, filter);
  const runs = await Promise.all(
    listing.runs.map(async (run) =>
      run.status === "running" ? withProgress(run, await readProgress(bus, run.runId)) : run,
    ),
  );
  // A running run's last change is its last step: the page is ordered again by it.
  listing.runs = runs.sort(byLastChange);
  return listing;
}

const Invariants = z.object({
  contract: z.string(),
  invariants: z.record(z.string(), z.object({ name: z.string(), tests: z.array(z.string()) })),
});

/** Each invariant with the tests bound to it, from `test/invariants.json`. */
export async function contracts(path: string): Promise<string[]> {
  const parsed = decode(Invariants, await readFile(path));
  const lines = [`contract: ${parsed.contract}`];
  for (const [id, inv] of Object.entries(parsed.invariants)) {
    lines.push(`${id}  ${inv.name}  (${inv.tests.length} tests)`);
    for (const test of inv.tests) lines.push(`    - ${test}`);
  }
  return lines;
}

/** Why a run has no records: its log expired with the stream's max_age after it finished, or it never had one. */
async function whyNoWal(bus: ActorBus, runId: string): Promise<string> {
  const status = await new RunStatusStore(bus.buckets.runs).get(runId);
  const finished = isFinished(status) ? status.status : (await auditTally(bus, runId)).finished && "finished";
  return finished
    ? `run '${runId}' ${finished}, and its log holds no record of it: the run log keeps messages for SUPERVISOR_LOG_MAX_AGE_MS`
    : `run '${runId}' has no log`;
}
