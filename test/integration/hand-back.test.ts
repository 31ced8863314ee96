import { jetstream } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { nakJobs, NAK } from "../../services/agent/strays.js";
import { ensureWorkerConsumer } from "../../shared/bus/jobs.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { ackSubject } from "../helpers/fake-worker.js";

/** A server of its own: the case needs a restart. */
const suite = useBusSuite("handback", { own: true });
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The consumer sequence of the delivery an ack subject names (`$JS.ACK.<stream>.<consumer>.<n>.<sseq>.<dseq>…`). */
const deliveryOf = (ack: string): number => Number(ack.split(".")[6]);

describe("handing jobs back: a gone worker's, by name, or a worker's own", () => {
  it("hands back a job whose delivery the ack floor has passed (after a server restart), which a NAK on its own subject leaves where it is", async () => {
    const stream = suite.subjects.streams().runs;
    const consumer = await ensureWorkerConsumer(suite.jsm, suite.subjects, { ackWaitMs: 60_000 });
    for (const run of ["first", "again", "behind"])
      await suite.js.publish(suite.subjects.runQueue(run), encoder.encode(run));
    const pulled = await jetstream(suite.nc).consumers.get(stream, consumer);
    const held = new Map<string, string>();
    for await (const msg of await pulled.fetch({ max_messages: 3, expires: 1_500 }))
      held.set(decoder.decode(msg.data), ackSubject(msg));
    expect([...held.keys()]).toEqual(["first", "again", "behind"]);
    // "again" is handed on (a gone worker's job) and taken by another worker: a later delivery.
    suite.nc.publish(held.get("again")!, NAK);
    const again = await pulled.next({ expires: 2_000 });
    expect(again && decoder.decode(again.data)).toBe("again");

    // The server restarts: it reads its pending jobs back with their latest deliveries, and
    // acknowledging "first" then moves the floor to just below "again"'s: past "behind"'s.
    await suite.server.restart?.({ signal: "SIGTERM" });
    await expect
      .poll(
        async () =>
          (await suite.jsm.consumers.info(stream, consumer).catch(() => undefined))?.num_ack_pending,
        {
          timeout: 10_000,
        },
      )
      .toBe(3);
    suite.nc.publish(held.get("first")!, encoder.encode("+ACK"));

    const offered = async (): Promise<string[]> => {
      const out: string[] = [];
      for await (const msg of await pulled.fetch({ max_messages: 1, expires: 1_000 })) {
        out.push(`${decoder.decode(msg.data)} ${msg.info.deliveryCount}`);
        msg.ack();
      }
      return out;
    };
    // What nats-server 2.9 does (a later release may not pass the floor; the hand-back works either way).
    if (suite.nc.info?.version.startsWith("2.9.")) {
      await expect
        .poll(async () => (await suite.jsm.consumers.info(stream, consumer)).ack_floor.consumer_seq)
        .toBeGreaterThanOrEqual(deliveryOf(held.get("behind")!));
      // It drops this NAK: "behind" would wait out its ack wait (a minute here).
      suite.nc.publish(held.get("behind")!, NAK);
      expect(await offered()).toEqual([]);
    }
    await nakJobs({ ...suite, logger: silentLogger }, consumer, [held.get("behind")!]);
    expect(await offered()).toEqual(["behind 2"]);

    // A consumer that cannot be read (here: a name nobody made) leaves each job's own subject.
    await suite.js.publish(suite.subjects.runQueue("plain"), encoder.encode("plain"));
    const plain = await pulled.next({ expires: 2_000 });
    expect(plain && decoder.decode(plain.data)).toBe("plain");
    await nakJobs({ ...suite, logger: silentLogger }, "nobody-made-this", [ackSubject(plain!)]);
    expect(await offered()).toEqual(["plain 2"]);
    again?.ack();
  }, 30_000);
});
