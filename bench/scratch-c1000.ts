import { startLocalNats } from "../dist/services/local/nats-server.js";
import { OurCluster, OUR_BENCH_ENV } from "./systems/ours.ts";
import type { LoopTiming } from "./lib/drive.ts";
const nats = await startLocalNats({});
const cluster = await OurCluster.start(nats.url, OUR_BENCH_ENV);
for (let i = 0; i < 20; i++) await cluster.runLoop();
const C = Number(process.argv[2] ?? 1000), LOOPS = Number(process.argv[3] ?? 2000);
const timings: LoopTiming[] = [];
let started = 0;
const t0 = performance.now();
const samples: string[] = [];
const sampler = setInterval(async () => {
  try {
    const info = await cluster.bus.jsm.consumers.info(cluster.bus.subjects.streams().runs, "agent-workers");
    samples.push(`${info.num_pending}/${info.num_ack_pending}/${info.num_waiting}`);
  } catch (e) { samples.push("err"); }
}, 1000);
await Promise.all(Array.from({ length: C }, async () => {
  while (started < LOOPS) { started++; timings.push(await cluster.runLoop()); }
}));
const wall = performance.now() - t0;
clearInterval(sampler);
console.log("queue pending/ackpending/waiting per s:", samples.join(" "));
const q = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]!.toFixed(1); };
const first = timings.map((t) => t.stepsMs[0] ?? 0);
const rest = timings.flatMap((t) => t.stepsMs.slice(1));
const all = timings.flatMap((t) => t.stepsMs);
console.log(`C=${C} loops=${timings.length} steps/s=${(all.length / wall * 1000).toFixed(0)} ok=${timings.filter((t) => t.ok).length}`);
console.log("first step p50/p90/p99", q(first, 0.5), q(first, 0.9), q(first, 0.99));
console.log("later steps p50/p90/p99/p999", q(rest, 0.5), q(rest, 0.9), q(rest, 0.99), q(rest, 0.999));
console.log("all p50/p99", q(all, 0.5), q(all, 0.99));
// by step index
const byIdx = Array.from({ length: 21 }, (_, i) => timings.map((t) => t.stepsMs[i]).filter((x): x is number => x !== undefined));
console.log("p99 by step index", byIdx.map((xs) => xs.length ? q(xs, 0.99) : "-").join(" "));
await cluster.stop(); await nats.stop();
