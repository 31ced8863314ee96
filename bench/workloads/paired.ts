import type { LoopTiming } from "../lib/drive.ts";
import type { Plan } from "../lib/plan.ts";
import type { Finding } from "../lib/row.ts";
import { median, quantile, round } from "../lib/stats.ts";
import { captureTrace } from "../lib/trace.ts";
import { STEPS } from "../lib/workload.ts";
import { Floor } from "../systems/floor.ts";
import { LangGraphLoop } from "../systems/langgraph.ts";
import { OurCluster, OUR_BENCH_ENV } from "../systems/ours.ts";

/** Loops of each side run, uncounted, before the pairs. */
const WARMUP_PAIRS = 3;

/** A loop's ms per step, or nothing for a failed loop (one that threw too: a submit refused or timed out). */
const perStep = (loop: Promise<LoopTiming>): Promise<number | undefined> =>
  loop.then(
    (t) => (t.ok ? t.loopMs / STEPS : undefined),
    () => undefined,
  );

type Side = "ours" | "floor" | "langgraph";
const SIDES: readonly Side[] = ["ours", "floor", "langgraph"];

/** The median and quartiles of a list of ratios. */
function spread(ratios: readonly number[]): { median: number; p25: number; p75: number } {
  return {
    median: round(median(ratios)),
    p25: round(quantile(ratios, 0.25)),
    p75: round(quantile(ratios, 0.75)),
  };
}

/**
 * W1a loop by loop, against our protocol's floor and against LangGraph with SqliteSaver. The W1
 * rows run each system for a minute or more, one after the other; this host's speed drifts by
 * more than the targets' margins between them (the floor alone took 2.7–5.1 ms/step across runs
 * of the same build, and ours 4.1–6.3 ms/step at C = 1 in the first minute of two full runs).
 * Here one process holds all three, ours on the same nats-server as the floor, and alternates: a
 * loop of ours, one of the floor replaying the trace ours just recorded, one of LangGraph in this
 * process, in an order that rotates. Each round saw the same machine, so the medians of the
 * rounds' ratios are the runtime's own overhead and its speed against LangGraph.
 */
export async function measurePaired(
  plan: Plan,
  natsUrl: string,
  say: (line: string) => void,
): Promise<Finding> {
  const cluster = await OurCluster.start(natsUrl, OUR_BENCH_ENV);
  const floor = await Floor.start(natsUrl).catch(async (err: unknown) => {
    await cluster.stop();
    throw err;
  });
  const langgraph = await LangGraphLoop.create("sqlite-sync");
  try {
    await cluster.runLoop();
    const trace = await captureTrace(cluster.bus.nc, () => cluster.runLoop());
    const run: Record<Side, () => Promise<number | undefined>> = {
      ours: () => perStep(cluster.runLoop()),
      floor: () => perStep(floor.runLoop(trace)),
      langgraph: () => perStep(langgraph.runLoop()),
    };
    for (let i = 0; i < WARMUP_PAIRS; i += 1) for (const side of SIDES) await run[side]();
    const ms: Record<Side, number[]> = { ours: [], floor: [], langgraph: [] };
    const overFloor: number[] = [];
    const langgraphOverOurs: number[] = [];
    let failed = 0;
    for (let i = 0; i < plan.pairedLoops; i += 1) {
      const times: Partial<Record<Side, number>> = {};
      // Rotated, so that no side always runs first, or right after another.
      for (let k = 0; k < SIDES.length; k += 1) {
        const side = SIDES[(i + k) % SIDES.length] as Side;
        times[side] = await run[side]();
      }
      const { ours, floor: f, langgraph: lg } = times;
      if (ours === undefined || f === undefined || lg === undefined) {
        failed += 1;
        continue;
      }
      ms.ours.push(ours);
      ms.floor.push(f);
      ms.langgraph.push(lg);
      overFloor.push(ours / f);
      langgraphOverOurs.push(lg / ours);
    }
    const overhead = spread(overFloor);
    const speed = spread(langgraphOverOurs);
    const figures = {
      pairs: overFloor.length,
      failed,
      oursMsPerStep: round(median(ms.ours)),
      floorMsPerStep: round(median(ms.floor)),
      langgraphMsPerStep: round(median(ms.langgraph)),
      // Ours over the floor: the runtime's overhead (the names earlier results carry).
      ratioMedian: overhead.median,
      ratioP25: overhead.p25,
      ratioP75: overhead.p75,
      // LangGraph's time over ours: how many times faster ours steps.
      vsLanggraphMedian: speed.median,
      vsLanggraphP25: speed.p25,
      vsLanggraphP75: speed.p75,
      traceMessages: trace.length,
    };
    say(
      `W1a paired: ${figures.ratioMedian}× our protocol's floor, ${figures.vsLanggraphMedian}× LangGraph's speed, over ${figures.pairs} rounds`,
    );
    return {
      workload: "W1a",
      label: "ours against our protocol's floor and LangGraph + SqliteSaver, loop by loop",
      figures,
    };
  } finally {
    await langgraph.stop();
    await floor.stop();
    await cluster.stop();
  }
}
