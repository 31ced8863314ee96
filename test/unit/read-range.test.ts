import type { JetStreamClient } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { readRange, type RangeQuery } from "../../shared/bus/read-range.js";
import { InstantClock } from "../../shared/runtime/clock.js";
import { seededRandom } from "../../shared/runtime/random.js";

/**
 * A stand-in for the JetStream API reads use (a consumer created per read, then deleted), over an
 * in-memory stream: what a real server cannot be made to do on cue (fail a pull half-way, stall)
 * is scripted here. The real server side of reads is covered by the WAL, audit and memory
 * integration tests and the failover test.
 */
function fakeReads(stored: number[], faults: { failAfter?: number; stallFrom?: number }) {
  const starts: number[] = [];
  const created: string[] = [];
  const deleted: string[] = [];
  const cursors = new Map<string, number>();
  let served = 0;
  const manager = {
    consumers: {
      add: (_stream: string, config: { opt_start_seq: number }) => {
        starts.push(config.opt_start_seq);
        const at = stored.findIndex((seq) => seq >= config.opt_start_seq);
        const cursor = at < 0 ? stored.length : at;
        const name = `reader-${created.length + 1}`;
        created.push(name);
        cursors.set(name, cursor);
        // What the server counts when it creates the consumer: the messages from its start on.
        return Promise.resolve({ name, num_pending: stored.length - cursor });
      },
      delete: (_stream: string, name: string) => {
        deleted.push(name);
        return Promise.resolve(true);
      },
    },
  };
  const reads = {
    jetstreamManager: () => Promise.resolve(manager),
    consumers: {
      getConsumerFromInfo: ({ name }: { name: string }) => ({
        fetch: ({ max_messages }: { max_messages: number }) =>
          Promise.resolve(
            (function* () {
              for (let i = 0; i < max_messages && (cursors.get(name) ?? 0) < stored.length; i++) {
                if (faults.stallFrom !== undefined && served >= faults.stallFrom) return;
                if (faults.failAfter !== undefined && served === faults.failAfter) {
                  faults.failAfter = undefined;
                  throw new Error("connection lost");
                }
                served += 1;
                const cursor = cursors.get(name) ?? 0;
                cursors.set(name, cursor + 1);
                const seq = stored[cursor] ?? 0;
                yield { seq, data: new TextEncoder().encode(String(seq)) };
              }
            })(),
          ),
      }),
    },
  } as unknown as JetStreamClient;
  return { reads, starts, created, deleted };
}

async function collect(reads: JetStreamClient, query: RangeQuery): Promise<number[]> {
  const seqs: number[] = [];
  const deps = { reads, clock: new InstantClock(0), random: seededRandom(3) };
  for await (const msg of readRange(deps, query)) seqs.push(msg.seq);
  return seqs;
}

// A filtered subject's messages are interleaved with others' in the stream: sparse sequences.
const stored = Array.from({ length: 600 }, (_, i) => 2 * i + 1);
const query = (end: RangeQuery["end"], fromSeq = 1): RangeQuery => ({
  stream: "S",
  filter: "s.>",
  fromSeq,
  end,
});

describe("readRange", () => {
  it("reads a range larger than one pull, in order, up to the last sequence", async () => {
    const { reads, starts } = fakeReads(stored, {});
    expect(await collect(reads, query({ untilSeq: 999 }, 201))).toEqual(
      stored.filter((s) => s >= 201 && s <= 999),
    );
    expect(starts).toEqual([201]);
  });

  it("stops after a count of messages", async () => {
    const { reads } = fakeReads(stored, {});
    expect(await collect(reads, query({ count: 300 }))).toEqual(stored.slice(0, 300));
  });

  it("`pending` reads what matched when it started, and across a failed pull only what was left", async () => {
    const { reads, starts } = fakeReads(stored, { failAfter: 257 });
    const tail = await collect(reads, query("pending", 201));
    expect(tail).toEqual(stored.filter((s) => s >= 201));
    expect(starts).toEqual([201, (tail[256] ?? 0) + 1]);
    const empty = fakeReads(stored, {});
    expect(await collect(empty.reads, query("pending", 5_000))).toEqual([]);
  });

  it("resumes a failed pull just after the last message delivered: nothing skipped, nothing twice", async () => {
    const { reads, starts, created, deleted } = fakeReads(stored, { failAfter: 257 });
    expect(await collect(reads, query({ count: 600 }))).toEqual(stored);
    expect(starts).toEqual([1, (stored[256] ?? 0) + 1]);
    // Each consumer is deleted once its read is over, the failed one too.
    expect(deleted).toEqual(created);
    expect(created).toHaveLength(2);
  });

  it("a reader that stops early deletes its consumer too", async () => {
    const { reads, created, deleted } = fakeReads(stored, {});
    const deps = { reads, clock: new InstantClock(0), random: seededRandom(3) };
    for await (const msg of readRange(deps, query({ count: 600 }))) if (msg.seq > 20) break;
    expect(created).toHaveLength(1);
    expect(deleted).toEqual(created);
  });

  it("gives up with BUS_UNAVAILABLE when pulls make no progress for the retry budget", async () => {
    const { reads, starts } = fakeReads(stored, { stallFrom: 10 });
    await expect(collect(reads, query({ count: 600 }))).rejects.toMatchObject({
      code: "BUS_UNAVAILABLE",
      message: expect.stringMatching(/made no progress/) as unknown,
    });
    // It kept trying on fresh consumers from the same place, not from the start.
    expect(starts.length).toBeGreaterThan(2);
    expect(new Set(starts.slice(1))).toEqual(new Set([(stored[9] ?? 0) + 1]));
  });
});
