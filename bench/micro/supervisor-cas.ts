/**
 * The supervisor's compare-and-sets for one loop, as W1 makes them: a pool slot taken and released
 * (a tree's iterations are counted by the workers, on JetStream counters); `--loops` loops at once (100: W1b's C), each
 * a new tree, in 5 waves a round. Each `--dist DIR` (a build's `dist`, the default this
 * repository's) runs in turns in one process on one nats-server, so an older build (`git worktree
 * add`, `npm run build` there) runs side by side with this one. Per loop: messages the client sent (a KV read, a write or a
 * refused write is one each), this process's CPU, nats-server's CPU, and the wall time of a round;
 * medians over the rounds, and each build's ratio to the first.
 * `node bench/micro/supervisor-cas.ts [--rounds N] [--loops N] [--dist DIR]...` after `npm run build`.
 */
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { connectBus } from "../../dist/shared/bus/connect.js";
import { provision } from "../../dist/shared/bus/provision.js";
import { Subjects } from "../../dist/shared/bus/subjects.js";
import type * as Pool from "../../dist/shared/bus/pool.js";
import { systemClock } from "../../dist/shared/runtime/clock.js";
import { silentLogger } from "../../dist/shared/runtime/logger.js";
import { systemRandom } from "../../dist/shared/runtime/random.js";
import { cpuMsOf } from "../lib/cpu.ts";
import { median, round } from "../lib/stats.ts";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "7" },
    loops: { type: "string", default: "100" },
    dist: { type: "string", multiple: true },
  },
});
const ROUNDS = Number(values.rounds);
const LOOPS = Number(values.loops);
/** Waves of `--loops` per round: enough CPU per round for /proc's 10 ms ticks. */
const WAVES = 5;
const DISTS = values.dist ?? [fileURLToPath(new URL("../../dist", import.meta.url))];

const nats = await startLocalNats({});
const subjects = new Subjects("bench-cas");
const admin = await connectBus({ servers: nats.url, name: "bench-cas-admin", logger: silentLogger });
await provision(admin, { subjects, replicas: 1 });

interface Build {
  dist: string;
  nc: NatsConnection;
  /** One supervisor's loops: every loop's slot and release. */
  loops: (round: number) => Promise<void>;
}

async function load(dist: string, index: number): Promise<Build> {
  const { PoolLedger } = (await import(`${dist}/shared/bus/pool.js`)) as typeof Pool;
  const nc = await connectBus({ servers: nats.url, name: `bench-cas-${index}`, logger: silentLogger });
  const pool = await new Kvm(nc).open(subjects.buckets().pool);
  // One ledger per build, as one supervisor holds it for its lifetime.
  const ledger = PoolLedger.of({ buckets: { pool }, clock: systemClock, random: systemRandom, nc });
  const loop = async (runId: string): Promise<void> => {
    await ledger.acquire(runId, 100_000);
    await ledger.release(runId);
  };
  return {
    dist,
    nc,
    loops: async (r) => {
      for (let w = 0; w < WAVES; w++)
        await Promise.all(Array.from({ length: LOOPS }, (_, i) => loop(`run-${index}-${r}-${w}-${i}`)));
    },
  };
}

const builds = await Promise.all(DISTS.map((dist, i) => load(dist, i)));
const samples = builds.map(() => ({
  sent: [] as number[],
  cpu: [] as number[],
  server: [] as number[],
  wall: [] as number[],
}));
// One uncounted round each: the first compare-and-sets pay for the client's and the server's warm-up.
for (const build of builds) await build.loops(-1);
for (let r = 0; r < ROUNDS; r++) {
  for (const [i, build] of builds.entries()) {
    const sent = build.nc.stats().outMsgs;
    const server = (await cpuMsOf(nats.pid ?? 0)) ?? 0;
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    await build.loops(r);
    const wall = performance.now() - t0;
    const used = process.cpuUsage(cpu);
    const s = samples[i]!;
    s.sent.push((build.nc.stats().outMsgs - sent) / (LOOPS * WAVES));
    s.cpu.push((used.user + used.system) / (LOOPS * WAVES));
    s.server.push(((((await cpuMsOf(nats.pid ?? 0)) ?? 0) - server) * 1_000) / (LOOPS * WAVES));
    s.wall.push(wall);
  }
}

const first = samples[0]!;
const ratio = (a: number[], b: number[]): string => `${round(median(a) / median(b))}×`;
console.log(`${ROUNDS} rounds of ${WAVES} × ${LOOPS} loops at once (a slot and its release each), medians\n`);
console.log("| build | messages / loop | client CPU µs / loop | nats-server CPU µs / loop | round ms |");
console.log("|---|---:|---:|---:|---:|");
for (const [i, build] of builds.entries()) {
  const s = samples[i]!;
  const cells = [s.sent, s.cpu, s.server, s.wall].map((xs) => round(median(xs)));
  console.log(`| ${build.dist} | ${cells.join(" | ")} |`);
  if (i > 0) {
    const ratios = (["sent", "cpu", "server", "wall"] as const).map((k) => ratio(s[k], first[k]));
    console.log(`| ratio to the first | ${ratios.join(" | ")} |`);
  }
}
for (const build of builds) await build.nc.close();
await admin.close();
await nats.stop();
