/**
 * JetStream publish-with-ack from the client's side: `js.publish` (the library's request per
 * message) against the runtime's `AckPublisher` (one subscription for every ack), side by side in
 * one process on one nats-server, rounds interleaved. Both publish the same audit-sized messages
 * with a message id to a file stream, one at a time and 64 in flight; reported as medians over the
 * rounds of wall time and client CPU per publish, and their ratios.
 * `node bench/micro/publish-ack.ts [rounds]` after `npm run build`.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { AckPublisher } from "../../dist/shared/bus/ack-publisher.js";
import { connectBus } from "../../dist/shared/bus/connect.js";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { silentLogger } from "../../dist/shared/runtime/logger.js";
import { median } from "../lib/stats.ts";

const ROUNDS = Number(process.argv[2] ?? 7);
const PER_ROUND = 2_000;
const IN_FLIGHT = 64;
const payload = new Uint8Array(380).fill(120);

const nats = await startLocalNats({});
// The runtime's connection settings (no async stack traces), for both clients.
const nc = await connectBus({ servers: nats.url, name: "bench-publish", logger: silentLogger });
const jsm = await jetstreamManager(nc);
await jsm.streams.add({ name: "PUBACK", subjects: ["puback.>"], storage: "file" });
const js = jetstream(nc);
const publisher = AckPublisher.of(nc);

let ids = 0;
type Publish = () => Promise<unknown>;
const variants: Record<string, Publish> = {
  "js.publish": () => js.publish("puback.js", payload, { msgID: `j${(ids += 1)}` }),
  AckPublisher: () => publisher.publish("puback.ours", payload, { msgID: `o${(ids += 1)}` }),
};

/** Wall and client CPU (user + system) per publish, in µs. */
async function round(publish: Publish, inFlight: number): Promise<{ wall: number; cpu: number }> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let left = PER_ROUND;
  const client = async (): Promise<void> => {
    while (left > 0) {
      left -= 1;
      await publish();
    }
  };
  await Promise.all(Array.from({ length: inFlight }, client));
  const cpu = process.cpuUsage(cpu0);
  return { wall: ((performance.now() - t0) * 1000) / PER_ROUND, cpu: (cpu.user + cpu.system) / PER_ROUND };
}

const lines: string[] = [];
for (const inFlight of [1, IN_FLIGHT]) {
  const samples = new Map<string, { wall: number[]; cpu: number[] }>();
  for (let r = 0; r < ROUNDS; r += 1) {
    // Alternate which goes first, so drift on a shared machine hits both alike.
    const order = r % 2 === 0 ? Object.keys(variants) : Object.keys(variants).reverse();
    for (const name of order) {
      const s = await round(variants[name]!, inFlight);
      const seen = samples.get(name) ?? { wall: [], cpu: [] };
      seen.wall.push(s.wall);
      seen.cpu.push(s.cpu);
      samples.set(name, seen);
    }
  }
  const base = samples.get("js.publish")!;
  const ours = samples.get("AckPublisher")!;
  for (const [name, s] of samples)
    lines.push(`| ${inFlight} | ${name} | ${median(s.wall).toFixed(0)} | ${median(s.cpu).toFixed(0)} |`);
  lines.push(
    `| ${inFlight} | ratio js.publish / AckPublisher | ${(median(base.wall) / median(ours.wall)).toFixed(2)}× | ${(median(base.cpu) / median(ours.cpu)).toFixed(2)}× |`,
  );
}
process.stdout.write(
  `${ROUNDS} rounds of ${PER_ROUND} publishes each (380 B, with a message id), medians\n\n` +
    `| in flight | client | wall µs/publish | client CPU µs/publish |\n|---:|---|---:|---:|\n${lines.join("\n")}\n`,
);
await nc.close();
await nats.stop();
