/**
 * Drives the planned runs through the cluster, `concurrency` at a time, as a client would: submit
 * (asked again while no supervisor answers or the pool is full: the same runId is never admitted
 * twice), follow the run's status until it settles, and answer its approval when it waits for one.
 */
import type { ClusterClient } from "../../dist/services/cli/client.js";
import type { RunStatus } from "../../dist/shared/contracts/run-status.js";
import { toAgentError } from "../../dist/shared/runtime/errors.js";
import type { PlannedRun } from "./mix.ts";

export interface Outcome {
  run: PlannedRun;
  /** The last status read: committed, failed, halted, awaiting_approval nobody expected, or unfinished. */
  status: string;
  reason?: string;
  /** Submit problems and approvals answered, for the report. */
  notes: string[];
}

const POLL_MS = 200;
const RETRY_MS = 250;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface DriveOptions {
  concurrency: number;
  /** A run not settled this long after its submit is given up as unfinished. */
  runTimeoutMs: number;
  signal: AbortSignal;
  /** Told after each run settles, with the share of runs settled so far. */
  onSettled: (share: number) => void;
}

export async function driveRuns(
  client: ClusterClient,
  runs: readonly PlannedRun[],
  options: DriveOptions,
): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < runs.length && !options.signal.aborted) {
      const run = runs[next++] as PlannedRun;
      const signal = AbortSignal.any([options.signal, AbortSignal.timeout(options.runTimeoutMs)]);
      outcomes.push(await driveOne(client, run, signal));
      options.onSettled(outcomes.length / runs.length);
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, runs.length) }, lane));
  return outcomes;
}

async function driveOne(client: ClusterClient, run: PlannedRun, signal: AbortSignal): Promise<Outcome> {
  const notes: string[] = [];
  while (!signal.aborted) {
    try {
      const reply = await client.submit(run.spec);
      if (notes.length > 0) notes.push(`submit ${reply.status}`);
      break;
    } catch (err) {
      const error = toAgentError(err);
      // Asked again only when the product says it may be: a spec refused for good is a wrong outcome.
      if (!error.retryable)
        return { run, status: "refused", reason: `${error.code} ${error.message}`, notes };
      notes.push(`submit ${error.code}: ${error.message}`);
      await sleep(RETRY_MS);
    }
  }
  let decided = false;
  let last: RunStatus | undefined;
  while (!signal.aborted) {
    last = await client.status.get(run.runId).catch(() => last);
    const status = last?.status;
    if (status === "committed" || status === "failed" || status === "halted") {
      return { run, status, ...reasonOf(last), notes };
    }
    if (status === "awaiting_approval") {
      if (run.kind !== "approve" && run.kind !== "reject") return { run, status, ...reasonOf(last), notes };
      if (!decided) decided = await decide(client, run, notes);
    }
    await sleep(POLL_MS);
  }
  return {
    run,
    status: "unfinished",
    reason: `status last seen ${last ? `${last.status} ${last.phase}` : "absent"}`,
    notes,
  };
}

async function decide(client: ClusterClient, run: PlannedRun, notes: string[]): Promise<boolean> {
  const decision = run.kind === "approve" ? "approve" : "reject";
  try {
    await client.decide(run.runId, { decision, by: "chaos", reason: `the soak's ${decision}` });
    notes.push(`${decision} sent`);
    return true;
  } catch (err) {
    notes.push(`${decision}: ${String(err)}`);
    return false;
  }
}

function reasonOf(status: RunStatus | undefined): { reason?: string } {
  const terminal = status?.terminal;
  return terminal ? { reason: `${terminal.kind} ${terminal.reason}` } : {};
}
