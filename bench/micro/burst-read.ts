/**
 * Is W3's hot resume slower after a long history because of its length, or because of the burst of
 * writes that came just before it? One nats-server, a WAL-like and an audit-like file stream.
 * Each sample writes a history shaped like W3's were when this was written (per step three 600 B
 * records and five 550 B audit events, a 37 KiB checkpoint every 10 steps, two records after the
 * last; checkpoints now come about every 30 steps, see the README's Durability), then times the first
 * read of its tail from the checkpoint as a resuming worker does (a consumer from the checkpoint's
 * sequence, then its messages). Three conditions, interleaved: the history alone (the burst grows
 * with the length); the same history after other subjects' traffic that makes every burst as
 * large as the longest history's; and the history alone, read no sooner than IDLE_MS after the
 * previous read of the stream (nats-server 2.9 keeps a block's cache while it was read in the
 * last 5 s: a short history, written at once into the block the previous sample just read, finds
 * it cached; the 10,000-step one, 6 s of writing, does not). Reported: the median first read per
 * length and condition, and the spread (max/min of those medians).
 * `node bench/micro/burst-read.ts [rounds]` after `npm run build`.
 */
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connectBus } from "../../dist/shared/bus/connect.js";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { silentLogger } from "../../dist/shared/runtime/logger.js";
import { median } from "../lib/stats.ts";

const ROUNDS = Number(process.argv[2] ?? 5);
const LENGTHS = [10, 1_000, 10_000];
const RECORD = new Uint8Array(600).fill(65);
const EVENT = new Uint8Array(550).fill(66);
const CHECKPOINT = new Uint8Array(37 * 1024).fill(67);
const CHUNK = new Uint8Array(64 * 1024).fill(68);
const IN_FLIGHT = 256;
/** Longer than nats-server 2.9 keeps a block's cache after a read (5 s). */
const IDLE_MS = 6_000;

const nats = await startLocalNats({});
const nc = await connectBus({ servers: nats.url, name: "bench-burst-read", logger: silentLogger });
const jsm = await jetstreamManager(nc);
await jsm.streams.add({ name: "BURST_WAL", subjects: ["bwal.>"], storage: "file" });
await jsm.streams.add({ name: "BURST_AUDIT", subjects: ["baudit.>"], storage: "file" });
const js = jetstream(nc);

/** Bytes a history of `steps` writes to each stream. */
function traffic(steps: number): { wal: number; audit: number } {
  const checkpoints = Math.ceil(steps / 10);
  return {
    wal: steps * 3 * RECORD.length + checkpoints * CHECKPOINT.length + 2 * RECORD.length,
    audit: steps * 5 * EVENT.length,
  };
}

/** Writes a history; returns its last checkpoint's sequence. */
async function writeHistory(run: string, steps: number): Promise<number> {
  let pending: Promise<unknown>[] = [];
  let checkpointSeq = 0;
  for (let step = 1; step <= steps; step += 1) {
    for (let i = 0; i < 3; i += 1) pending.push(js.publish(`bwal.${run}`, RECORD));
    for (let i = 0; i < 5; i += 1) pending.push(js.publish(`baudit.${run}.e${i}`, EVENT));
    if (step % 10 === 0 || step === steps) {
      pending.push(js.publish(`bwal.${run}`, CHECKPOINT).then((ack) => (checkpointSeq = ack.seq)));
    }
    if (pending.length >= IN_FLIGHT) {
      await Promise.all(pending);
      pending = [];
    }
  }
  await Promise.all(pending);
  for (let i = 0; i < 2; i += 1) await js.publish(`bwal.${run}`, RECORD);
  return checkpointSeq;
}

/** Other runs' traffic, in 64 KiB messages. */
async function writeOther(run: string, bytes: { wal: number; audit: number }): Promise<void> {
  for (const [subject, total] of [
    [`bwal.other-${run}`, bytes.wal],
    [`baudit.other-${run}.x`, bytes.audit],
  ] as const) {
    for (let sent = 0; sent < total; sent += 32 * CHUNK.length) {
      const n = Math.min(32, Math.ceil((total - sent) / CHUNK.length));
      await Promise.all(Array.from({ length: n }, () => js.publish(subject, CHUNK)));
    }
  }
}

/** The tail from the checkpoint, as a resuming worker reads it: ms until its last message. */
async function firstRead(run: string, fromSeq: number): Promise<number> {
  const t0 = performance.now();
  const info = await jsm.consumers.add("BURST_WAL", {
    filter_subject: `bwal.${run}`,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: fromSeq,
    ack_policy: AckPolicy.None,
    mem_storage: true,
  });
  const batch = await js.consumers.getConsumerFromInfo(info).fetch({
    max_messages: info.num_pending,
    expires: 3_000,
  });
  let left = info.num_pending;
  for await (const _msg of batch) if ((left -= 1) === 0) break;
  const ms = performance.now() - t0;
  await jsm.consumers.delete("BURST_WAL", info.name);
  if (left !== 0) throw new Error(`run ${run}: ${left} of the tail's messages never came`);
  return ms;
}

const CONDITIONS = ["alone", "equal burst", "alone, idle"];
const longest = traffic(Math.max(...LENGTHS));
const samples = new Map<string, number[]>();
let lastRead = 0;
for (let round = 0; round < ROUNDS; round += 1) {
  for (let i = 0; i < LENGTHS.length; i += 1) {
    // Rotated per round, and so are the conditions, so drift lands on every cell alike.
    const steps = LENGTHS[(round + i) % LENGTHS.length] as number;
    const conditions = CONDITIONS.map((_c, j) => CONDITIONS[(round + j) % CONDITIONS.length] as string);
    for (const [j, condition] of conditions.entries()) {
      const run = `r${round}-${steps}-${j}`;
      if (condition === "equal burst") {
        const own = traffic(steps);
        await writeOther(run, { wal: longest.wal - own.wal, audit: longest.audit - own.audit });
      }
      const checkpointSeq = await writeHistory(run, steps);
      const idle = condition === "alone, idle" ? IDLE_MS - (performance.now() - lastRead) : 0;
      if (idle > 0) await new Promise((resolve) => setTimeout(resolve, idle));
      const ms = await firstRead(run, checkpointSeq);
      lastRead = performance.now();
      const key = `${condition}|${steps}`;
      samples.set(key, [...(samples.get(key) ?? []), ms]);
    }
  }
  process.stderr.write(`round ${round + 1}/${ROUNDS} done\n`);
}

const rows: string[] = [];
for (const condition of CONDITIONS) {
  const medians = LENGTHS.map((steps) => median(samples.get(`${condition}|${steps}`) ?? []));
  const spread = Math.max(...medians) / Math.min(...medians);
  rows.push(`| ${condition} | ${medians.map((m) => m.toFixed(2)).join(" | ")} | ${spread.toFixed(2)}× |`);
}
process.stdout.write(
  `${ROUNDS} rounds; first read of the tail after a history's writes, median ms\n\n` +
    `| condition | ${LENGTHS.map((n) => `${n} steps`).join(" | ")} | max/min |\n` +
    `|---|${LENGTHS.map(() => "---:").join("|")}|---:|\n${rows.join("\n")}\n`,
);
await nc.close();
await nats.stop();
