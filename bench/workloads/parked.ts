import type { Plan } from "../lib/plan.ts";
import type { Finding } from "../lib/row.ts";
import { rssOf } from "../lib/rss.ts";
import { round } from "../lib/stats.ts";
import { ourLoopSpec } from "../lib/workload.ts";
import { OurCluster, OUR_BENCH_ENV } from "../systems/ours.ts";

const SUBMITTERS = 50;

/** A one-step run that then waits for a human's approval before it commits. */
function parkingSpec(): Record<string, unknown> {
  const spec = ourLoopSpec("parked") as {
    task: Record<string, unknown>;
    agent: { model: Record<string, unknown> };
  };
  return {
    ...spec,
    task: { ...spec.task, requiresApproval: true },
    agent: { ...spec.agent, model: { provider: "scripted", script: [{ text: "ready for approval" }] } },
  };
}

/**
 * W4: `plan.parked` runs waiting for approval. A parked run holds no worker, so the workers'
 * memory should not grow with them: reported as bytes of RSS per parked run, per process.
 */
export async function measureParked(
  plan: Plan,
  natsUrl: string,
  say: (line: string) => void,
): Promise<Finding> {
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
    const spec = parkingSpec();
    let next = 0;
    let parked = 0;
    const t0 = performance.now();
    const submitter = async (): Promise<void> => {
      while (next < plan.parked) {
        next += 1;
        const t = await cluster.runLoop(spec);
        if (t.status === "awaiting_approval") parked += 1;
      }
    };
    await Promise.all(Array.from({ length: SUBMITTERS }, submitter));
    const wallMs = performance.now() - t0;
    // Let garbage collection catch up before reading memory: a parked run must leave nothing behind.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const after = await rss();
    const perRun = Object.fromEntries(
      Object.keys(after).map((name) => [
        `${name} B/run`,
        round(((after[name] ?? 0) - (before[name] ?? 0)) / parked),
      ]),
    );
    const figures = {
      parked,
      parkPerSec: round((parked * 1000) / wallMs),
      ...perRun,
      "durable B/run": round(((await cluster.storedBytes()) - bytesBefore) / parked),
    };
    say(`W4: ${parked} parked; ${JSON.stringify(perRun)}`);
    return { workload: "W4", label: `${plan.parked} runs waiting for approval`, figures };
  } finally {
    await cluster.stop();
  }
}
