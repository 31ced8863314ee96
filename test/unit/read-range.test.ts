import type { JetStreamManager } from "@nats-io/jetstream";
import { describe, expect, it, vi } from "vitest";
import { readRange, type RangeQuery } from "../../shared/bus/read-range.js";
import { InstantClock } from "../../shared/runtime/clock.js";
import { seededRandom } from "../../shared/runtime/random.js";

/**
 * A stand-in for batched direct gets over an in-memory stream, answered by a replica that may
 * hold less than its leader (`held`) or fail a request: what a real server cannot be made to do on
 * cue. The real server side of reads is covered by the WAL, audit and memory integration tests and
 * the failover test.
 */
function fakeDirect(
  stored: number[],
  replica: { held?: number; caughtUpAfter?: number; failFirst?: number; hangFirst?: boolean } = {},
) {
  const starts: number[] = [];
  let failures = replica.failFirst ?? 0;
  let hang = replica.hangFirst ?? false;
  const jsm = {
    direct: {
      getBatch: (_stream: string, { seq, batch }: { seq: number; batch: number }) => {
        starts.push(seq);
        if (failures > 0) {
          failures -= 1;
          return Promise.reject(new Error("timeout"));
        }
        const caughtUp = replica.caughtUpAfter !== undefined && starts.length > replica.caughtUpAfter;
        const visible = stored.slice(0, caughtUp ? stored.length : (replica.held ?? stored.length));
        const from = visible.filter((s) => s >= seq);
        const page = from.slice(0, batch).map((s, i) => ({
          subject: "s.x",
          seq: s,
          data: new TextEncoder().encode(String(s)),
          header: undefined,
          pending: from.length - i - 1,
        }));
        // A server that dies after its first message: the answer stops until the reader gives up.
        let giveUp: (err: Error) => void = () => undefined;
        const stopped = new Promise<never>((_, reject) => (giveUp = reject));
        const hangs = hang;
        hang = false;
        const messages = (async function* () {
          if (page.length === 0) throw Object.assign(new Error("message not found"), { code: 404 });
          if (hangs) {
            yield page[0];
            await stopped;
          }
          yield* page;
        })();
        return Promise.resolve(Object.assign(messages, { stop: (err: Error) => giveUp(err) }));
      },
    },
  } as unknown as JetStreamManager;
  return { jsm, starts };
}

const deps = (jsm: JetStreamManager) => ({ jsm, clock: new InstantClock(0), random: seededRandom(3) });

async function collect(
  jsm: JetStreamManager,
  query: Omit<RangeQuery, "stream" | "filter">,
): Promise<number[]> {
  const seqs: number[] = [];
  for await (const msg of readRange(deps(jsm), { stream: "S", filter: "s.>", ...query })) seqs.push(msg.seq);
  return seqs;
}

// A filtered subject's messages are interleaved with others' in the stream: sparse sequences.
const stored = Array.from({ length: 1_500 }, (_, i) => 2 * i + 1);

describe("readRange", () => {
  it("asks again for a page left unanswered for 5 s (its server died mid-answer), from the same place", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const { jsm, starts } = fakeDirect(stored, { hangFirst: true });
      const reading = collect(jsm, { count: 10 });
      await vi.advanceTimersByTimeAsync(5_000);
      expect(await reading).toEqual(stored.slice(0, 10));
      expect(starts).toEqual([1, 1]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("reads a range larger than one page, in order, up to the last sequence, each page after the last", async () => {
    const { jsm, starts } = fakeDirect(stored);
    expect(await collect(jsm, { fromSeq: 201, untilSeq: 2_799 })).toEqual(
      stored.filter((s) => s >= 201 && s <= 2_799),
    );
    // The 1,024th message is 2,247: the second page asks from just after it.
    expect(starts).toEqual([201, 2_248]);
  });

  it("stops after a count of messages, and without an end reads what the server holds", async () => {
    const { jsm } = fakeDirect(stored);
    expect(await collect(jsm, { count: 300 })).toEqual(stored.slice(0, 300));
    expect(await collect(jsm, {})).toEqual(stored);
    expect(await collect(jsm, { fromSeq: 5_000 })).toEqual([]);
  });

  it("asks again when the answering replica holds less than the end it must reach, and gets there", async () => {
    const behind = fakeDirect(stored, { held: 1_200, caughtUpAfter: 5 });
    expect(await collect(behind.jsm, { untilSeq: stored.at(-1) ?? 0 })).toEqual(stored);
    expect(behind.starts.length).toBeGreaterThan(5);
    const counted = fakeDirect(stored, { held: 100, caughtUpAfter: 3 });
    expect(await collect(counted.jsm, { count: 200 })).toEqual(stored.slice(0, 200));
  });

  it("rides out failed requests, and gives up with BUS_UNAVAILABLE when the end never comes", async () => {
    const { jsm } = fakeDirect(stored, { failFirst: 3 });
    expect(await collect(jsm, { count: 1_500 })).toEqual(stored);
    const stuck = fakeDirect(stored, { held: 10 });
    await expect(collect(stuck.jsm, { count: 600 })).rejects.toMatchObject({ code: "BUS_UNAVAILABLE" });
    // Every new request starts after the last message delivered: nothing twice.
    expect(new Set(stuck.starts.slice(1))).toEqual(new Set([(stored[9] ?? 0) + 1]));
  });
});
