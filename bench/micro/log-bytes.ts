/**
 * Where a W1 loop's durable bytes go: the cluster as the bench runs it, `--loops` loops one after
 * another, then the growth of every stream and bucket the runtime writes (JetStream's `state.bytes`,
 * what the bench's "durable B/loop" counts), and one loop's run log message by message: subject,
 * headers and payload, the records by type, the events by kind, and the fields the events repeat.
 * `node bench/micro/log-bytes.ts [--loops N] [--dump FILE]` after `npm run build`; `--dump` writes
 * the last loop's payloads as decoded JSON.
 */
import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { readRange } from "../../dist/shared/bus/read-range.js";
import { OurCluster, OUR_BENCH_ENV } from "../systems/ours.ts";
import * as runLog from "../../dist/shared/bus/run-log.js";

const { values } = parseArgs({
  options: { loops: { type: "string", default: "20" }, dump: { type: "string" } },
});
const LOOPS = Number(values.loops);

/** nats-server's file store: a message costs 22 + subject + headers (+4) + payload + 8 bytes. */
const OVERHEAD = 30;
const HEADERS_LENGTH = 4;

/** Headers a direct get's reply adds: not stored with the message. */
const REPLY_HEADERS = new Set([
  "Nats-Stream",
  "Nats-Subject",
  "Nats-Sequence",
  "Nats-Time-Stamp",
  "Nats-Num-Pending",
  "Nats-Last-Sequence",
]);

const nats = await startLocalNats({});
const cluster = await OurCluster.start(nats.url, OUR_BENCH_ENV);
const { bus } = cluster;

async function storeBytes(): Promise<Map<string, number>> {
  const bytes = new Map<string, number>();
  for (const name of bus.subjects.storeStreams())
    bytes.set(name, (await bus.jsm.streams.info(name)).state.bytes);
  return bytes;
}

try {
  for (let i = 0; i < 3; i += 1) await cluster.runLoop();
  const before = await storeBytes();
  let last = "";
  for (let i = 0; i < LOOPS; i += 1) last = (await cluster.runLoop()).runId;
  const after = await storeBytes();
  const rows: [string, number][] = [...after].map(([name, b]) => [
    name,
    (b - (before.get(name) ?? 0)) / LOOPS,
  ]);
  const total = rows.reduce((sum, [, b]) => sum + b, 0);
  console.log(`durable B/loop over ${LOOPS} loops: ${Math.round(total)}`);
  for (const [name, b] of rows) if (b > 0) console.log(`  ${name.padEnd(28)} ${Math.round(b)}`);
  await breakdown(last);
} finally {
  await cluster.stop();
  await nats.stop();
}

function storedKeys(h: { keys(): string[] } | undefined): string[] {
  return (h?.keys() ?? []).filter((k) => !REPLY_HEADERS.has(k));
}

function headerBytes(h: { keys(): string[]; get(k: string): string } | undefined): number {
  if (!h) return 0;
  let n = "NATS/1.0\r\n".length + 2;
  for (const k of storedKeys(h)) n += k.length + 2 + h.get(k).length + 2;
  return n;
}

function add(map: Map<string, number[]>, key: string, bytes: number): void {
  const row = map.get(key) ?? [0, 0];
  row[0]! += 1;
  row[1]! += bytes;
  map.set(key, row);
}

function table(title: string, map: Map<string, number[]>): void {
  console.log(title);
  for (const [k, [n, b]] of [...map].sort((a, b) => b[1]![1]! - a[1]![1]!))
    console.log(
      `  ${k.padEnd(34)} ${String(n).padStart(4)} × ${String(Math.round(b! / n!)).padStart(6)} = ${b}`,
    );
}

async function breakdown(runId: string): Promise<void> {
  const stream = bus.subjects.streams().log;
  const filter = bus.subjects.logAll(runId);
  const parts = { messages: 0, overhead: 0, subject: 0, headers: 0, payload: 0 };
  const records = new Map<string, number[]>();
  const events = new Map<string, number[]>();
  const fields = new Map<string, number[]>();
  const headerKeys = new Map<string, number[]>();
  const dump: unknown[] = [];
  const sizes: number[] = [];
  const deps = { jsm: bus.jsm, clock: bus.clock, random: bus.random, subjects: bus.subjects };
  for await (const msg of readRange(deps, { stream, filter })) {
    parts.messages += 1;
    parts.overhead += OVERHEAD + (msg.headers ? HEADERS_LENGTH : 0);
    parts.subject += msg.subject.length;
    parts.headers += headerBytes(msg.headers);
    for (const k of storedKeys(msg.headers)) add(headerKeys, k, k.length + 4 + msg.headers!.get(k).length);
    parts.payload += msg.data.length;
    sizes.push(msg.data.length);
    const entry = await runLog.entryOfMessage(
      deps,
      runLog.storedAsLog({ ...msg, header: msg.headers } as never),
    );
    if (!entry) continue;
    dump.push({
      subject: msg.subject,
      headers: Object.fromEntries((msg.headers?.keys() ?? []).map((k) => [k, msg.headers!.get(k)])),
      entry,
    });
    for (const r of entry.records) add(records, r.type, JSON.stringify(r).length + 1);
    for (const e of entry.events) {
      add(events, e.kind, JSON.stringify(e).length + 1);
      for (const [k, v] of Object.entries(e)) add(fields, k, JSON.stringify({ [k]: v }).length - 1);
    }
    const rest = { ...entry, records: undefined, events: undefined };
    add(fields, "(entry: progress and framing)", JSON.stringify(rest).length);
  }
  const sum = parts.overhead + parts.subject + parts.headers + parts.payload;
  console.log(`\nrun ${runId}: ${parts.messages} messages, ${sum} B`);
  for (const [k, v] of Object.entries(parts)) if (k !== "messages") console.log(`  ${k.padEnd(10)} ${v}`);
  console.log(`  payload by message: ${sizes.join(" ")}`);
  table("stored headers by key (bytes incl. ': ' and CRLF)", headerKeys);
  table("records by type (JSON bytes)", records);
  table("events by kind (JSON bytes)", events);
  table("event fields (JSON bytes, all events)", fields);
  if (values.dump) await writeFile(values.dump, JSON.stringify(dump, null, 1));
}
