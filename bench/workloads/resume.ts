import { AgentEnv } from "../../dist/services/agent/env.js";
import type { Plan } from "../lib/plan.ts";
import type { Finding } from "../lib/row.ts";
import { median, quantile, round } from "../lib/stats.ts";
import { STEPS } from "../lib/workload.ts";
import { OurCluster, OUR_BENCH_ENV } from "../systems/ours.ts";

/**
 * W2 runs the workers with their production defaults (read from the schema that sets them): the
 * ack wait after which JetStream gives a dead worker's jobs to another.
 */
const defaults = AgentEnv.parse({});
const VICTIM = "agent-1";

/**
 * W2: `kill -9` one of two workers while W1 loops run, then time, for every run it held, the gap
 * between the kill and that run's next log message written by the other worker.
 */
export async function measureResume(
  plan: Plan,
  natsUrl: string,
  say: (line: string) => void,
): Promise<Finding[]> {
  const cluster = await OurCluster.start(natsUrl, OUR_BENCH_ENV);
  try {
    const lastWriter = new Map<string, string>();
    const resumedAt = new Map<string, number>();
    let killedAt: number | undefined;
    let records = 0;
    let kill!: () => void;
    const killed = new Promise<void>((resolve) => (kill = resolve));
    const half = (plan.resumeLoops * STEPS) / 2;
    cluster.logListeners.add(({ runId, types, writer, at }) => {
      if (killedAt === undefined) {
        lastWriter.set(runId, types.includes("TERMINAL") ? "" : writer);
        if (types.includes("MODEL") && (records += 1) >= half) kill();
      } else if (
        !resumedAt.has(runId) &&
        lastWriter.get(runId)?.startsWith(`${VICTIM}-`) &&
        !writer.startsWith(`${VICTIM}-`)
      ) {
        resumedAt.set(runId, at - killedAt);
      }
    });
    const loops = Array.from({ length: plan.resumeLoops }, () => cluster.runLoop());
    await killed;
    cluster.cluster.signal(VICTIM, "SIGKILL");
    killedAt = performance.now();
    const done = await Promise.all(loops);
    const orphans = [...lastWriter.values()].filter((w) => w.startsWith(`${VICTIM}-`)).length;
    const samples = [...resumedAt.values()];
    const figures = {
      loops: plan.resumeLoops,
      orphaned: orphans,
      resumed: samples.length,
      committed: done.filter((d) => d.status === "committed").length,
      ackWaitMs: defaults.AGENT_ACK_WAIT_MS,
      p50Ms: round(median(samples)),
      maxMs: round(quantile(samples, 1)),
    };
    say(
      `W2: ${samples.length}/${orphans} orphaned runs resumed, p50 ${figures.p50Ms} ms, max ${figures.maxMs} ms`,
    );
    return [{ workload: "W2", label: "resume after kill -9 of a worker", figures }];
  } finally {
    await cluster.stop();
  }
}
