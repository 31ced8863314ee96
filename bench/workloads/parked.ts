import type { Plan } from "../lib/plan.ts";
import type { Finding } from "../lib/row.ts";
import { PoolLedger } from "../../dist/shared/bus/pool.js";
import { CpuMeter } from "../lib/cpu.ts";
import { rssOf } from "../lib/rss.ts";
import { round } from "../lib/stats.ts";
import { ourLoopSpec } from "../lib/workload.ts";
import { OurCluster, OUR_BENCH_ENV } from "../systems/ours.ts";

const SUBMITTERS = 50;

/** A one-step run that then commits, or with `approval` waits for a human's before it does. */
function oneStepSpec(approval: boolean): Record<string, unknown> {
  const spec = ourLoopSpec(approval ? "parked" : "unparked") as {
    task: Record<string, unknown>;
    agent: { model: Record<string, unknown> };
  };
  return {
    ...spec,
    task: { ...spec.task, ...(approval ? { requiresApproval: true } : {}) },
    agent: { ...spec.agent, model: { provider: "scripted", script: [{ text: "ready for approval" }] } },
  };
}

interface Phase {
  /** Runs that ended as expected: parked, or committed. */
  ended: number;
  perSec: number;
  /** CPU per run, µs, by process (nats-server left out: the bench's own reads go through it too). */
  cpuPerRun: Record<string, number>;
  /**
   * Runs still holding a pool slot when the last run had ended: for runs that commit, how far the
   * supervisor's releases trail the runs (each holds its slot until its release is written).
   */
  slotsHeld: number;
  /** RSS growth per process over the phase, bytes. */
  grown: Record<string, number>;
  storedBytes: number;
}

/** Submits `count` runs of `spec` through SUBMITTERS clients on a fresh cluster, reading RSS around them. */
async function phase(
  natsUrl: string,
  count: number,
  spec: Record<string, unknown>,
  expected: "awaiting_approval" | "committed",
): Promise<Phase> {
  const cluster = await OurCluster.start(natsUrl, OUR_BENCH_ENV);
  try {
    await cluster.runLoop();
    const rss = async (): Promise<Record<string, number>> => {
      const out: Record<string, number> = {};
      for (const [name, pid] of cluster.pids) out[name] = (await rssOf(pid)) ?? 0;
      return out;
    };
    await new Promise((resolve) => setTimeout(resolve, 500));
    const before = await rss();
    const bytesBefore = await cluster.storedBytes();
    let next = 0;
    let ended = 0;
    const cpu = await CpuMeter.start(cluster.pids);
    const t0 = performance.now();
    const submitter = async (): Promise<void> => {
      while (next < count) {
        next += 1;
        const t = await cluster.runLoop(spec);
        if (t.status === expected) ended += 1;
      }
    };
    await Promise.all(Array.from({ length: SUBMITTERS }, submitter));
    const wallMs = performance.now() - t0;
    const cpuPerRun = await cpu.perStep(Math.max(ended, 1));
    const slotsHeld = (await PoolLedger.of(cluster.bus).active()).length;
    // Let garbage collection catch up before reading memory: a parked run must leave nothing behind.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const after = await rss();
    const grown = Object.fromEntries(Object.keys(after).map((n) => [n, (after[n] ?? 0) - (before[n] ?? 0)]));
    return {
      ended,
      perSec: (ended * 1000) / wallMs,
      cpuPerRun,
      slotsHeld,
      grown,
      storedBytes: (await cluster.storedBytes()) - bytesBefore,
    };
  } finally {
    await cluster.stop();
  }
}

/**
 * W4: `plan.parked` runs waiting for approval. A parked run holds no worker, so the workers'
 * memory should not grow with them. A process's RSS also grows with the load itself (V8 keeps the
 * heap it grew to while submits poured in), so the same number of runs that commit instead of
 * parking is measured too, each on a fresh cluster, and what a parked run holds is the difference:
 * `held B/run` = (growth parking − growth committing) / runs.
 */
export async function measureParked(
  plan: Plan,
  natsUrl: string,
  say: (line: string) => void,
): Promise<Finding> {
  const committed = await phase(natsUrl, plan.parked, oneStepSpec(false), "committed");
  say(`W4 baseline: ${committed.ended} runs committed`);
  const parked = await phase(natsUrl, plan.parked, oneStepSpec(true), "awaiting_approval");
  const perRun = (bytes: number, runs: number): number => round(bytes / Math.max(runs, 1));
  const figures: Record<string, number> = {
    parked: parked.ended,
    parkPerSec: round(parked.perSec),
    commitPerSec: round(committed.perSec),
    "supervisor CPU µs/run": round(parked.cpuPerRun.supervisor ?? 0),
    "supervisor CPU µs/run committed": round(committed.cpuPerRun.supervisor ?? 0),
    "slots held at end, committed": committed.slotsHeld,
  };
  for (const name of Object.keys(parked.grown)) {
    const grownParked = parked.grown[name] ?? 0;
    const grownCommitted = committed.grown[name] ?? 0;
    figures[`${name} B/run`] = perRun(grownParked, parked.ended);
    figures[`${name} B/run committed`] = perRun(grownCommitted, committed.ended);
    figures[`${name} held B/run`] = perRun(grownParked - grownCommitted, parked.ended);
  }
  figures["durable B/run"] = perRun(parked.storedBytes, parked.ended);
  figures.committed = committed.ended;
  say(`W4: ${parked.ended} parked; ${JSON.stringify(figures)}`);
  return { workload: "W4", label: `${plan.parked} runs waiting for approval`, figures };
}
