/**
 * A model provider's outage, with and without the workers' shared breaker: R runs start while the
 * provider (a model actor the bench serves) is down for O ms, each wanting one turn; the provider
 * fails every turn meanwhile with MODEL_RATE_LIMITED, as a driver's retries spent would. Per trial
 * and mode: how many turns the provider was asked while down and in all, and how long after it came
 * back the runs committed (median and last): the breaker saves the provider's asks, and may cost
 * recovery time (a refused run waits for its next retry). Also how many times a worker took a run
 * over (read its log to drive it again), from the workers' logs: with the breaker, a run it refused
 * is left queued until the breaker lets a call try. Modes alternate, in turns, on one server.
 * `node bench/micro/model-outage.ts [runs] [outageMs] [trials]` after `npm run build`
 * (defaults 200, 10000, 3; about a minute a trial).
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { ModelRequest, ModelResponse } from "../../dist/shared/contracts/model.js";
import { serveModel } from "../../dist/shared/bus/model-actor.js";
import { AgentError } from "../../dist/shared/runtime/errors.js";
import { silentLogger } from "../../dist/shared/runtime/logger.js";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { median, round } from "../lib/stats.ts";
import { FINAL_ANSWER, ourLoopSpec } from "../lib/workload.ts";
import { OurCluster, OUR_BENCH_ENV } from "../systems/ours.ts";

const RUNS = Number(process.argv[2] ?? 200);
const OUTAGE_MS = Number(process.argv[3] ?? 10_000);
const TRIALS = Number(process.argv[4] ?? 3);
const PROVIDER = "bench-provider";
/** The breaker's settings in `on` mode: the default threshold, a cooldown scaled to the outage. */
const BREAKER = { AGENT_MODEL_BREAKER_FAILURES: "5", AGENT_MODEL_BREAKER_COOLDOWN_MS: "2000" };
const ENV = {
  ...OUR_BENCH_ENV,
  AGENT_RETRY_DELAY_MS: "500",
  AGENT_MODEL_OUTAGE_MS: "120000",
};

const ANSWER: ModelResponse = {
  text: FINAL_ANSWER,
  toolCalls: [],
  stopReason: "endTurn",
  usage: { inputTokens: 1, outputTokens: 1 },
  costUsd: 0,
  model: PROVIDER,
};

interface Trial {
  askedWhileDown: number;
  asked: number;
  /** Each run's commit, in ms after the provider came back. */
  committedAfterUp: number[];
  failed: number;
  /** Runs taken over by a worker (each one read the run's log to drive it again). */
  takeovers: number;
}

/** Lines saying a worker took a run over, in the cluster's logs (read once its actors have stopped). */
async function takeoversIn(logDir: string): Promise<number> {
  let count = 0;
  for (const file of await readdir(logDir)) {
    const text = await readFile(join(logDir, file), "utf8");
    count += text.split("\n").filter((line) => line.includes('"msg":"taking over the run"')).length;
  }
  return count;
}

async function trial(natsUrl: string, breaker: boolean): Promise<Trial> {
  const cluster = await OurCluster.start(natsUrl, {
    ...ENV,
    ...(breaker ? BREAKER : { AGENT_MODEL_BREAKER_FAILURES: "0" }),
  });
  let measured: Omit<Trial, "takeovers">;
  try {
    let upAt = Number.POSITIVE_INFINITY;
    let asked = 0;
    let askedWhileDown = 0;
    const served = serveModel(
      PROVIDER,
      (_request: ModelRequest) => {
        asked += 1;
        if (performance.now() >= upAt) return Promise.resolve(ANSWER);
        askedWhileDown += 1;
        return Promise.reject(new AgentError("MODEL_RATE_LIMITED", "provider error (429): slow down"));
      },
      { ...cluster.bus, logger: silentLogger },
    );
    const base = ourLoopSpec("outage");
    const agent = base["agent"] as Record<string, unknown>;
    const spec = { ...base, agent: { ...agent, model: { provider: "actor", name: PROVIDER } } };
    upAt = performance.now() + OUTAGE_MS;
    const settled = await Promise.all(
      Array.from({ length: RUNS }, () =>
        cluster.runLoop(spec).then((timing) => ({ timing, at: performance.now() })),
      ),
    );
    served.unsubscribe();
    measured = {
      askedWhileDown,
      asked,
      committedAfterUp: settled.filter((s) => s.timing.status === "committed").map((s) => s.at - upAt),
      failed: settled.filter((s) => s.timing.status !== "committed").length,
    };
  } finally {
    await cluster.stop();
  }
  return { ...measured, takeovers: await takeoversIn(cluster.logDir) };
}

const nats = await startLocalNats({});
const results: Record<"off" | "on", Trial[]> = { off: [], on: [] };
try {
  for (let t = 0; t < TRIALS; t += 1) {
    // In turns, the first mode alternating: the host's drift lands on both.
    const modes: ("off" | "on")[] = t % 2 === 0 ? ["off", "on"] : ["on", "off"];
    for (const mode of modes) {
      const r = await trial(nats.url, mode === "on");
      results[mode].push(r);
      process.stdout.write(
        `trial ${t + 1} breaker ${mode}: asked ${r.askedWhileDown} times while down (${r.asked} in all); ${r.takeovers} takeovers; committed ${r.committedAfterUp.length}/${RUNS}, median ${round(median(r.committedAfterUp))} ms and last ${round(Math.max(...r.committedAfterUp))} ms after the provider came back\n`,
      );
    }
  }
} finally {
  await nats.stop();
}
const med = (mode: "off" | "on", pick: (r: Trial) => number): number => median(results[mode].map(pick));
const downOff = med("off", (r) => r.askedWhileDown);
const downOn = med("on", (r) => r.askedWhileDown);
process.stdout.write(
  `\n${RUNS} runs, provider down ${OUTAGE_MS} ms, ${TRIALS} trials (medians): asks while down ${downOff} without the breaker, ${downOn} with it (${round(downOn / downOff)}×); ` +
    `last commit after the provider came back ${round(med("off", (r) => Math.max(...r.committedAfterUp)))} ms without, ${round(med("on", (r) => Math.max(...r.committedAfterUp)))} ms with; ` +
    `median commit ${round(med("off", (r) => median(r.committedAfterUp)))} ms without, ${round(med("on", (r) => median(r.committedAfterUp)))} ms with; ` +
    `takeovers ${med("off", (r) => r.takeovers)} without, ${med("on", (r) => r.takeovers)} with; runs not committed: ${results.off.reduce((n, r) => n + r.failed, 0)} and ${results.on.reduce((n, r) => n + r.failed, 0)}\n`,
);
