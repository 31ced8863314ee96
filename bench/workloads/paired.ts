import type { LoopTiming } from "../lib/drive.ts";
import type { Plan } from "../lib/plan.ts";
import type { Finding } from "../lib/row.ts";
import { median, quantile, round } from "../lib/stats.ts";
import { captureTrace } from "../lib/trace.ts";
import { STEPS } from "../lib/workload.ts";
import { Floor } from "../systems/floor.ts";
import { OurCluster, OUR_BENCH_ENV } from "../systems/ours.ts";

/** Loops of each side run, uncounted, before the pairs. */
const WARMUP_PAIRS = 3;

/** A loop's ms per step, or nothing for a failed loop (one that threw too: a submit refused or timed out). */
const perStep = (loop: Promise<LoopTiming>): Promise<number | undefined> =>
  loop.then(
    (t) => (t.ok ? t.loopMs / STEPS : undefined),
    () => undefined,
  );

/**
 * W1a against our protocol's floor, loop by loop. The W1 rows run each system for a minute or
 * more, one after the other; this host's speed drifts by more than the target's margin between
 * them (the floor alone took 2.7–5.1 ms/step across runs of the same build). Here one process
 * holds both, on the same nats-server, and alternates: a loop of ours, a loop of the floor
 * replaying the trace ours just recorded (which goes first alternates too). Each pair saw the same
 * machine, so the median of the pairs' ratios is the runtime's own overhead.
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
  try {
    await cluster.runLoop();
    const trace = await captureTrace(cluster.bus.nc, () => cluster.runLoop());
    const ours = (): Promise<number | undefined> => perStep(cluster.runLoop());
    const base = (): Promise<number | undefined> => perStep(floor.runLoop(trace));
    for (let i = 0; i < WARMUP_PAIRS; i += 1) {
      await ours();
      await base();
    }
    const oursMs: number[] = [];
    const floorMs: number[] = [];
    const ratios: number[] = [];
    let failed = 0;
    for (let i = 0; i < plan.pairedLoops; i += 1) {
      let mine: number | undefined;
      let f: number | undefined;
      if (i % 2 === 0) {
        mine = await ours();
        f = await base();
      } else {
        f = await base();
        mine = await ours();
      }
      if (mine === undefined || f === undefined) {
        failed += 1;
        continue;
      }
      oursMs.push(mine);
      floorMs.push(f);
      ratios.push(mine / f);
    }
    const figures = {
      pairs: ratios.length,
      failed,
      oursMsPerStep: round(median(oursMs)),
      floorMsPerStep: round(median(floorMs)),
      ratioMedian: round(median(ratios)),
      ratioP25: round(quantile(ratios, 0.25)),
      ratioP75: round(quantile(ratios, 0.75)),
      traceMessages: trace.length,
    };
    say(`W1a paired: ${figures.ratioMedian}× our protocol's floor over ${figures.pairs} pairs`);
    return { workload: "W1a", label: "ours against our protocol's floor, loop by loop", figures };
  } finally {
    await floor.stop();
    await cluster.stop();
  }
}
