import { median, quantile, round } from "./stats.ts";
import { STEPS } from "./workload.ts";

/** One loop's timings, as every system reports them. */
export interface LoopTiming {
  /** Step latencies: submit → first step durable, then step → step. */
  stepsMs: number[];
  loopMs: number;
  ok: boolean;
}

export interface DriveResult {
  c: number;
  loops: number;
  failed: number;
  wallMs: number;
  msPerStep: number;
  stepsPerSec: number;
  stepP50: number;
  stepP99: number;
}

/**
 * A closed loop: `c` clients, each starting its next loop as soon as its last one settled, until
 * `loops` have run. Throughput is steps over wall time; latencies are per step.
 */
export async function drive(
  c: number,
  loops: number,
  runLoop: () => Promise<LoopTiming>,
): Promise<DriveResult> {
  const timings: LoopTiming[] = [];
  let started = 0;
  const t0 = performance.now();
  const client = async (): Promise<void> => {
    while (started < loops) {
      started += 1;
      // A loop that throws (a submit refused or timed out) is a failed loop, not a failed bench.
      timings.push(await runLoop().catch(() => ({ stepsMs: [], loopMs: 0, ok: false })));
    }
  };
  await Promise.all(Array.from({ length: Math.min(c, loops) }, client));
  const wallMs = performance.now() - t0;
  const ok = timings.filter((t) => t.ok);
  const steps = ok.flatMap((t) => t.stepsMs);
  return {
    c,
    loops,
    failed: timings.length - ok.length,
    wallMs: round(wallMs),
    msPerStep: round(median(ok.map((t) => t.loopMs / STEPS))),
    stepsPerSec: round((ok.length * STEPS * 1000) / wallMs),
    stepP50: round(quantile(steps, 0.5)),
    stepP99: round(quantile(steps, 0.99)),
  };
}
