/**
 * Every agent worker killed at once (a node lost with all its pods, or `kill -9` of a whole
 * deployment), new workers started a second later: how long until each run the dead workers held
 * takes its next step, counted from the moment the first new worker is ready. No live worker ever
 * heard the dead ones beat, so nobody hands their jobs back by name; before a newcomer looked for
 * jobs no live worker names, they all waited out the job consumer's ack wait (30 s by default).
 * W2 kills one worker of two, and the survivor hands its jobs back: that is not this case.
 *
 * Each `--dist DIR` (a build's `dist`, the default this repository's) takes its turn in every round,
 * on one nats-server: a fresh supervisor, tool service and critic of this repository's build, two
 * workers of the build under test, `--loops` W1 loops at once, both workers killed with SIGKILL
 * once half of the loops' steps are durable, two new workers of the same build started after
 * `--restart-ms`. Reports per build the orphaned runs, their resume time after the newcomers were
 * ready (median and max over all rounds), and the loops that committed.
 * `node bench/micro/restart-all.ts [--rounds N] [--loops N] [--restart-ms N] [--dist DIR]...` after
 * `npm run build` (a round takes about 5 s, or about 35 s for a build whose newcomers wait out the
 * ack wait).
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type * as Local from "../../dist/services/local/cluster.js";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { systemClock } from "../../dist/shared/runtime/clock.js";
import { median, round } from "../lib/stats.ts";
import { STEPS } from "../lib/workload.ts";
import { OurCluster, OUR_BENCH_ENV } from "../systems/ours.ts";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    loops: { type: "string", default: "100" },
    "restart-ms": { type: "string", default: "1000" },
    dist: { type: "string", multiple: true },
  },
});
const ROUNDS = Number(values.rounds);
const LOOPS = Number(values.loops);
const RESTART_MS = Number(values["restart-ms"]);
const DISTS = values.dist ?? [fileURLToPath(new URL("../../dist", import.meta.url))];

interface Trial {
  orphaned: number;
  /** Per orphaned run that resumed: ms from the first newcomer's readiness to its next log message. */
  resumedMs: number[];
  committed: number;
}

async function trial(natsUrl: string, dist: string): Promise<Trial> {
  const { LocalCluster } = (await import(`${dist}/services/local/cluster.js`)) as typeof Local;
  const ours = await OurCluster.start(natsUrl, OUR_BENCH_ENV, 0);
  const logDir = await mkdtemp(join(tmpdir(), "bench-restart-all-"));
  const workers = new LocalCluster({ natsUrl, useConfUsers: false, logDir, env: OUR_BENCH_ENV });
  try {
    await Promise.all([workers.start("agent", "old-1"), workers.start("agent", "old-2")]);
    const lastWriter = new Map<string, string>();
    const resumedAt = new Map<string, number>();
    let killed = false;
    let readyAt: number | undefined;
    let models = 0;
    let kill!: () => void;
    const half = new Promise<void>((resolve) => (kill = resolve));
    ours.logListeners.add(({ runId, types, writer, at }) => {
      if (!killed) {
        lastWriter.set(runId, types.includes("TERMINAL") ? "" : writer);
        if (types.includes("MODEL") && (models += 1) >= (LOOPS * STEPS) / 2) kill();
      } else if (
        readyAt !== undefined &&
        !resumedAt.has(runId) &&
        lastWriter.get(runId)?.startsWith("old-")
      ) {
        resumedAt.set(runId, at - readyAt);
      }
    });
    const loops = Array.from({ length: LOOPS }, () => ours.runLoop());
    await half;
    workers.signal("old-1", "SIGKILL");
    workers.signal("old-2", "SIGKILL");
    killed = true;
    await systemClock.sleep(RESTART_MS);
    const starting = [workers.start("agent", "new-1"), workers.start("agent", "new-2")];
    await Promise.race(starting);
    readyAt = performance.now();
    await Promise.all(starting);
    const done = await Promise.all(loops);
    return {
      orphaned: [...lastWriter.values()].filter((writer) => writer.startsWith("old-")).length,
      resumedMs: [...resumedAt.values()],
      committed: done.filter((d) => d.status === "committed").length,
    };
  } finally {
    await workers.stop();
    await ours.stop();
  }
}

const nats = await startLocalNats({});
const results = DISTS.map(() => [] as Trial[]);
try {
  for (let r = 1; r <= ROUNDS; r += 1) {
    for (const [i, dist] of DISTS.entries()) {
      const t = await trial(nats.url, dist);
      results[i]!.push(t);
      console.log(
        `round ${r} ${dist}: ${t.resumedMs.length}/${t.orphaned} orphaned runs resumed, median ` +
          `${round(median(t.resumedMs))} ms, max ${round(Math.max(...t.resumedMs))} ms after the newcomers; ` +
          `${t.committed}/${LOOPS} committed`,
      );
    }
  }
} finally {
  await nats.stop();
}
console.log(
  `\n| build | orphaned | resumed | resume after newcomers ready, median ms | max ms | committed |`,
);
console.log(`|---|---:|---:|---:|---:|---:|`);
for (const [i, dist] of DISTS.entries()) {
  const trials = results[i]!;
  const all = trials.flatMap((t) => t.resumedMs);
  const sum = (f: (t: Trial) => number): number => trials.reduce((acc, t) => acc + f(t), 0);
  console.log(
    `| ${dist} | ${sum((t) => t.orphaned)} | ${all.length} | ${round(median(all))} | ` +
      `${round(Math.max(...all))} | ${sum((t) => t.committed)}/${LOOPS * trials.length} |`,
  );
}
