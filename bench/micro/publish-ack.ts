/**
 * The client's side of the two exchanges every step makes, the library's way against the
 * runtime's, side by side in one process on one nats-server, rounds interleaved:
 * - JetStream publish-with-ack: `js.publish` (the library's request per message) against
 *   `AckPublisher`; audit-sized messages with a message id, to a file stream;
 * - request/reply: `nc.request` against `ReplyInbox` (both: one subscription for every reply),
 *   tool-call-sized requests to a bare responder in a process of its own.
 * One at a time and 64 in flight; medians over the rounds of wall time and of this process's CPU
 * per exchange, and their ratios.
 * `node bench/micro/publish-ack.ts [rounds]` after `npm run build`.
 */
import { spawn } from "node:child_process";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { AckPublisher } from "../../dist/shared/bus/ack-publisher.js";
import { ReplyInbox } from "../../dist/shared/bus/reply-inbox.js";
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
const replies = ReplyInbox.of(nc);

/** The responder: its own process, so that this one's CPU is the requesting client's alone. */
const RESPONDER = `
import { connect } from "@nats-io/transport-node";
const nc = await connect({ servers: process.argv[1] });
nc.subscribe("rr.echo", { callback: (_e, m) => m.respond(m.data) });
await nc.flush();
process.stdout.write("ready\\n");
await nc.closed();
`;
const responder = spawn(process.execPath, ["--input-type=module", "-e", RESPONDER, nats.url], {
  stdio: ["ignore", "pipe", "inherit"],
});
await new Promise<void>((resolve) => responder.stdout.once("data", () => resolve()));
const request = new Uint8Array(420).fill(121);

let ids = 0;
type Exchange = () => Promise<unknown>;
/** Per pair, the library's way first, then the runtime's. */
const pairs: Record<string, Record<string, Exchange>> = {
  publish: {
    "js.publish": () => js.publish("puback.js", payload, { msgID: `j${(ids += 1)}` }),
    AckPublisher: () => publisher.publish("puback.ours", payload, { msgID: `o${(ids += 1)}` }),
  },
  request: {
    "nc.request": () => nc.request("rr.echo", request, { timeout: 5_000 }),
    ReplyInbox: () => replies.request("rr.echo", request, { timeoutMs: 5_000 }),
  },
};

/** Wall and client CPU (user + system) per publish, in µs. */
async function round(publish: Exchange, inFlight: number): Promise<{ wall: number; cpu: number }> {
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
for (const [pair, variants] of Object.entries(pairs))
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
    const [baseName, oursName] = Object.keys(variants) as [string, string];
    const base = samples.get(baseName)!;
    const ours = samples.get(oursName)!;
    for (const [name, s] of samples)
      lines.push(
        `| ${pair} | ${inFlight} | ${name} | ${median(s.wall).toFixed(0)} | ${median(s.cpu).toFixed(0)} |`,
      );
    lines.push(
      `| ${pair} | ${inFlight} | ratio ${baseName} / ${oursName} | ${(median(base.wall) / median(ours.wall)).toFixed(2)}× | ${(median(base.cpu) / median(ours.cpu)).toFixed(2)}× |`,
    );
  }
process.stdout.write(
  `${ROUNDS} rounds of ${PER_ROUND} exchanges each (publishes: 380 B with a message id; requests: 420 B), medians\n\n` +
    `| exchange | in flight | client | wall µs | client CPU µs |\n|---|---:|---|---:|---:|\n${lines.join("\n")}\n`,
);
responder.kill();
await nc.close();
await nats.stop();
