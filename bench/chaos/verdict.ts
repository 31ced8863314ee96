/**
 * The soak's checks over what it collected, and its one line of figures. A check that fails adds
 * a problem line naming the run; any problem fails the soak.
 */
import type { AuditEvent } from "../../dist/shared/contracts/audit.js";
import { quantile } from "../lib/stats.ts";
import type { Outcome } from "./driver.ts";
import { checkEffects } from "./effects.ts";
import type { Fault } from "./faults.ts";
import type { Execution } from "./ledger.ts";
import { groupBy, longestStall, resumeWaits, runTime, trailProblem } from "./trails.ts";

export interface Evidence {
  outcomes: readonly Outcome[];
  /** Every run's audit events, as the run log holds them. */
  events: readonly AuditEvent[];
  /** Status of every child run (by runId), read at the end. */
  children: ReadonlyMap<string, string>;
  ledger: readonly Execution[];
  faults: readonly Fault[];
  wallMs: number;
}

export interface Bounds {
  maxStallMs: number;
  maxResumeMs: number;
}

export interface Verdict {
  line: string;
  problems: string[];
}

type Trails = { byRun: Map<string, AuditEvent[]>; byTree: Map<string, AuditEvent[]> };

const ENDED = new Set(["committed", "failed"]);
const secs = (ms: number): string => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(1)}s` : "-");

/** Every root as its script says (committed or failed), with its children, each committed. */
function terminal(evidence: Evidence, trails: Trails, problems: string[]): number {
  let wrong = 0;
  for (const o of evidence.outcomes) {
    const children = new Set((trails.byTree.get(o.run.runId) ?? []).map((e) => e.runId));
    children.delete(o.run.runId);
    const closed = trails.byRun
      .get(o.run.runId)
      ?.find((e) => e.kind === "run.committed" || e.kind === "run.failed");
    const trail =
      o.status !== o.run.expected && closed && !ENDED.has(o.status)
        ? `; its trail closed with ${closed.kind}`
        : "";
    if (o.status !== o.run.expected) {
      problems.push(
        `${o.run.runId} (${o.run.kind}): ${o.status}, ${o.run.expected} expected (${o.reason ?? "no reason"})${trail}`,
      );
    } else if (o.status === "committed" && children.size !== o.run.children) {
      problems.push(
        `${o.run.runId} (${o.run.kind}): committed with ${children.size} of ${o.run.children} children`,
      );
    } else continue;
    wrong += 1;
  }
  for (const [id, status] of evidence.children) {
    if (status === "committed") continue;
    problems.push(`${id} (child): ${status}, committed expected`);
    wrong += 1;
  }
  return wrong;
}

/** Every ended run's trail gapless and closed once (see trailProblem); how many are not. */
function gapless(evidence: Evidence, trails: Trails, problems: string[]): number {
  const notes = new Map(evidence.outcomes.map((o) => [o.run.runId, o.notes]));
  const ended = [
    ...evidence.outcomes.filter((o) => ENDED.has(o.status)).map((o) => o.run.runId),
    ...[...evidence.children].filter(([, s]) => ENDED.has(s)).map(([id]) => id),
  ];
  let gaps = 0;
  for (const runId of ended) {
    const trail = trails.byRun.get(runId) ?? [];
    const problem = trailProblem(trail);
    if (!problem) continue;
    gaps += 1;
    const last = [...trail].sort((a, b) => a.seq - b.seq).slice(-3);
    const client = notes.get(runId)?.length ? `; the soak's client: ${notes.get(runId)?.join(", ")}` : "";
    problems.push(`${runId}: audit trail ${problem} (ends ${last.map((e) => e.kind).join(", ")})${client}`);
  }
  return gaps;
}

/** No run tree silent longer than the bound, no take-over later than its bound after its fault. */
function timely(
  evidence: Evidence,
  trails: Trails,
  bounds: Bounds,
  problems: string[],
): { stalls: number; resumes: number[] } {
  let stalls = 0;
  for (const o of evidence.outcomes) {
    const stall = longestStall(trails.byTree.get(o.run.runId) ?? []);
    if (stall.ms <= bounds.maxStallMs) continue;
    stalls += 1;
    const before = stall.before;
    problems.push(
      `${o.run.runId}: recorded nothing for ${stall.ms} ms before ${before?.runId} ${before?.kind} seq ${before?.seq}`,
    );
  }
  const resumes = [...trails.byRun.values()].flatMap((run) => resumeWaits(run, evidence.faults));
  const late = resumes.filter((ms) => ms > bounds.maxResumeMs);
  if (late.length > 0)
    problems.push(
      `${late.length} take-overs later than ${bounds.maxResumeMs} ms after their fault: ${late.join(", ")} ms`,
    );
  return { stalls, resumes };
}

export function judge(evidence: Evidence, bounds: Bounds): Verdict {
  const problems: string[] = [];
  const trails = {
    byRun: groupBy(evidence.events, (e) => e.runId),
    byTree: groupBy(evidence.events, (e) => e.rootRunId),
  };
  const { outcomes } = evidence;
  const wrong = terminal(evidence, trails, problems);
  const gaps = gapless(evidence, trails, problems);
  const { stalls, resumes } = timely(evidence, trails, bounds, problems);
  const effects = checkEffects(evidence.ledger, trails.byRun, outcomes);
  for (const key of effects.duplicates) problems.push(`executed twice: ${key}`);
  for (const key of effects.untraced) problems.push(`booking not completed in its run's trail: ${key}`);
  problems.push(...effects.mismatched);

  const times = outcomes.map((o) => runTime(trails.byRun.get(o.run.runId) ?? [])).filter(Number.isFinite);
  const count = (kind: Fault["kind"]): number => evidence.faults.filter((f) => f.kind === kind).length;
  const figures = {
    runs: outcomes.length,
    committed: outcomes.filter((o) => o.status === "committed").length,
    failed: outcomes.filter((o) => o.status === "failed").length,
    wrong,
    children: evidence.children.size,
    effects: evidence.ledger.length,
    kills: count("kill"),
    nats_restarts: count("nats-restart"),
    supervisor_rolls: count("supervisor-roll"),
    duplicates: effects.duplicates.length,
    untraced: effects.untraced.length,
    gaps,
    stalls,
    takeovers: resumes.length,
    takeover_p50: secs(quantile(resumes, 0.5)),
    takeover_max: secs(quantile(resumes, 1)),
    run_p50: secs(quantile(times, 0.5)),
    run_max: secs(quantile(times, 1)),
    wall: secs(evidence.wallMs),
  };
  const line = Object.entries(figures)
    .map(([name, value]) => `${name}=${value}`)
    .join(" ");
  return { line: `chaos: ${line}`, problems };
}
