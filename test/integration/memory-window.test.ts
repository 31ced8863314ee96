import fc from "fast-check";
import { Kvm } from "@nats-io/kv";
import { describe, expect, it } from "vitest";
import { KvMemory, memoryReads } from "../../shared/bus/kv-memory.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { bucketStream } from "../../shared/bus/subjects.js";

/** A recall window on the memory bucket: the latest memories of an agent, read without the rest. */
const suite = useBusSuite("mw");

const stream = (): string => bucketStream(suite.subjects.buckets().memory);
const windowed = (size: number): KvMemory =>
  new KvMemory(suite.buckets.memory, systemClock, memoryReads(suite, size));
const everything = (): KvMemory => new KvMemory(suite.buckets.memory, systemClock, memoryReads(suite));

/** The texts `store` recalls for `agent` (every memory matches the query), sorted. */
async function recalled(store: KvMemory, agent: string): Promise<string[]> {
  return (await store.recall(agent, "fact", 10_000)).map((m) => m.text).sort();
}

const fact = (agent: string, i: number): string => `fact ${String(i).padStart(4, "0")} of ${agent}`;

/** Stores facts `from`…`to - 1` of `agent`, each followed by one of `other` when given. */
async function store(agent: string, from: number, to: number, other?: string): Promise<void> {
  const writer = everything();
  for (let i = from; i < to; i += 1) {
    await writer.remember(agent, fact(agent, i));
    if (other) await writer.remember(other, fact(other, i));
  }
}

const facts = (agent: string, from: number, to: number): string[] =>
  Array.from({ length: to - from }, (_, k) => fact(agent, from + k)).sort();

/**
 * Counts the direct gets made on the memory bucket's stream while `during` runs (a count, or a
 * page of memories), and the messages the connection took in meanwhile (each request is one of
 * them: the count sees it). No recall makes a consumer: those are counted too.
 */
async function getsMade(during: () => Promise<unknown>): Promise<number> {
  const { gets, consumers } = await traffic(during);
  expect(consumers).toBe(0);
  return gets;
}

async function traffic(
  during: () => Promise<unknown>,
): Promise<{ gets: number; consumers: number; taken: number }> {
  let gets = 0;
  let consumers = 0;
  const sub = suite.nc.subscribe("$JS.API.>", {
    callback: (_err, msg) => {
      if (msg.subject === `$JS.API.DIRECT.GET.${stream()}`) gets += 1;
      if (msg.subject.startsWith(`$JS.API.CONSUMER.CREATE.${stream()}`)) consumers += 1;
    },
  });
  await suite.nc.flush();
  const before = suite.nc.stats().inMsgs;
  await during();
  await suite.nc.flush();
  sub.unsubscribe();
  return { gets, consumers, taken: suite.nc.stats().inMsgs - before };
}

describe("memory recall window", () => {
  it("reads an agent's latest memories only, finds where they start once, then starts there", async () => {
    await store("agent/w", 0, 60, "agent/x");
    const store5 = windowed(5);
    let recall: string[] = [];
    // 60 memories, 120 with the other agent's: more than twice the window, so a search.
    const first = await traffic(async () => (recall = await recalled(store5, "agent/w")));
    expect(recall).toEqual(facts("agent/w", 55, 60));
    expect(first.consumers).toBe(0);
    expect(first.gets).toBeLessThanOrEqual(10);
    // Per get its request (seen by the count), a message and the batch's end; the stream's info; at
    // most 2 × 5 memories: not the 60 memories of reading everything.
    expect(first.taken).toBeLessThanOrEqual(3 * first.gets + 2 + 10);
    // Reading everything still finds every memory.
    expect(await recalled(everything(), "agent/w")).toEqual(facts("agent/w", 0, 60));

    // A few new memories: a count and a page, from where the window began.
    await store("agent/w", 60, 63, "agent/x");
    expect(await getsMade(async () => (recall = await recalled(store5, "agent/w")))).toBe(2);
    expect(recall).toEqual(facts("agent/w", 58, 63));

    // More than twice the window since: a new search, and the latest again.
    await store("agent/w", 63, 80, "agent/x");
    expect(await getsMade(async () => (recall = await recalled(store5, "agent/w")))).toBeGreaterThan(2);
    expect(recall).toEqual(facts("agent/w", 75, 80));
    expect(await recalled(store5, "agent/x")).toEqual(facts("agent/x", 75, 80));
  });

  it("halves back to the window's start when a look back overshoots it (many old memories, few new)", async () => {
    await store("agent/d", 0, 40);
    await store("agent/busy", 0, 30);
    await store("agent/d", 40, 42);
    const store5 = windowed(5);
    let recall: string[] = [];
    const first = await traffic(async () => (recall = await recalled(store5, "agent/d")));
    expect(recall).toEqual(facts("agent/d", 37, 42));
    expect(first.gets).toBeGreaterThan(3);
    expect(first.gets).toBeLessThanOrEqual(13);
    // As above: counts, the stream's info, and at most 2 × 5 memories, not the 42.
    expect(first.taken).toBeLessThanOrEqual(3 * first.gets + 2 + 10);
    // The next read starts where this window began: a count and a page, not the look back again.
    await store("agent/busy", 30, 40);
    await store("agent/d", 42, 43);
    expect(await getsMade(async () => (recall = await recalled(store5, "agent/d")))).toBe(2);
    expect(recall).toEqual(facts("agent/d", 38, 43));
  });

  it("leaves out a memory forgotten inside the window, and an agent with few memories reads them all", async () => {
    await store("agent/f", 0, 3);
    const store5 = windowed(5);
    let recall: string[] = [];
    // Three memories among the earlier tests' hundreds: a look back to the stream's start.
    expect(await getsMade(async () => (recall = await recalled(store5, "agent/f")))).toBeLessThanOrEqual(11);
    expect(recall).toEqual(facts("agent/f", 0, 3));
    const [gone] = await store5.recall("agent/f", fact("agent/f", 1), 1);
    expect(gone?.text).toBe(fact("agent/f", 1));
    expect(await store5.forget("agent/f", gone?.id ?? "")).toBe(true);
    expect(await recalled(store5, "agent/f")).toEqual([fact("agent/f", 0), fact("agent/f", 2)]);
    expect(await recalled(windowed(5), "agent/f")).toEqual([fact("agent/f", 0), fact("agent/f", 2)]);
  });

  it("an agent with no memories yet looks back once, then reads from where the stream ended", async () => {
    const store5 = windowed(5);
    let recall: string[] = [];
    // The whole stream (the earlier tests' memories) looked through, a few steps back.
    expect(await getsMade(async () => (recall = await recalled(store5, "agent/new")))).toBeGreaterThan(2);
    expect(recall).toEqual([]);
    // Then one count finds nothing new, and nothing is read.
    expect(await getsMade(async () => (recall = await recalled(store5, "agent/new")))).toBe(1);
    expect(recall).toEqual([]);
    await store("agent/new", 0, 2, "agent/busy");
    expect(await getsMade(async () => (recall = await recalled(store5, "agent/new")))).toBe(2);
    expect(recall).toEqual(facts("agent/new", 0, 2));
  });

  it("finds the latest memories whatever the interleaving, the window and the writes between reads (property)", async () => {
    let n = 0;
    const writes = fc.array(fc.boolean(), { minLength: 0, maxLength: 60 });
    await fc.assert(
      fc.asyncProperty(writes, writes, fc.integer({ min: 1, max: 12 }), async (before, between, size) => {
        n += 1;
        const agent = `agent/p${n}`;
        const writer = everything();
        const mine: string[] = [];
        let others = 0;
        const write = async (batch: boolean[]): Promise<void> => {
          for (const isMine of batch) {
            const text = isMine ? fact(agent, mine.length) : fact(`${agent}-other`, (others += 1));
            await writer.remember(isMine ? agent : `${agent}-other`, text);
            if (isMine) mine.push(text);
          }
        };
        const latest = (): string[] => mine.slice(-size).sort();
        await write(before);
        const reader = windowed(size);
        expect(await recalled(reader, agent)).toEqual(latest());
        // Then from the start the first read kept, after whatever came since.
        await write(between);
        expect(await recalled(reader, agent)).toEqual(latest());
        expect(await recalled(reader, agent)).toEqual(latest());
      }),
      { numRuns: 25, seed: 20261126 },
    );
  });

  it("reads anew when the bucket was made again and its sequences started over", async () => {
    await store("agent/r", 0, 30);
    const store5 = windowed(5);
    expect(await recalled(store5, "agent/r")).toEqual(facts("agent/r", 25, 30));
    await suite.jsm.streams.delete(stream());
    await new Kvm(suite.nc).create(suite.subjects.buckets().memory, { history: 1 });
    await store("agent/r", 100, 102);
    expect(await recalled(store5, "agent/r")).toEqual(facts("agent/r", 100, 102));
  });
});
