import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { Writable } from "node:stream";
import { JOB_PULL_MS, pullJobs, pullWentSilent } from "../../services/agent/job-intake.js";
import { startLocalNats } from "../../services/local/nats-server.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { createLogger } from "../../shared/runtime/logger.js";

describe("a worker's job pull", () => {
  it("a job pull the server leaves silent for a moment (stopped) fails as gone silent; one on a closed connection does not", async () => {
    // Its own server: the test stops it.
    await using nats = await startLocalNats();
    const nc = await connect({ servers: nats.url });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: "PULLS", subjects: ["pulls.>"] });
      await jsm.consumers.add("PULLS", { durable_name: "workers", ack_policy: AckPolicy.Explicit });
      const consumer = await jetstream(nc).consumers.get("PULLS", "workers");
      // A pull with nothing to deliver ends with nothing.
      expect(await consumer.next({ expires: JOB_PULL_MS })).toBeNull();
      const pulled = consumer.next({ expires: JOB_PULL_MS }).then(
        () => "answered",
        (err: unknown) => err,
      );
      await systemClock.sleep(100);
      process.kill(nats.pid!, "SIGSTOP");
      let outcome: unknown;
      try {
        outcome = await pulled;
      } finally {
        process.kill(nats.pid!, "SIGCONT");
      }
      expect(outcome).toBeInstanceOf(Error);
      expect(pullWentSilent(outcome)).toBe(true);
      // Other failures keep their pause (a closed connection, a deleted consumer).
      expect(pullWentSilent(new Error("heartbeats missed"))).toBe(false);
      await nc.close();
      const closed = await consumer.next({ expires: JOB_PULL_MS }).catch((err: unknown) => err);
      expect(closed).toBeInstanceOf(Error);
      expect(pullWentSilent(closed)).toBe(false);
    } finally {
      if (!nc.isClosed()) await nc.close();
    }
  });

  it("a worker's pulls left silent for seconds say so once, then that they are answered again, and take the job sent meanwhile", async () => {
    await using nats = await startLocalNats();
    const nc = await connect({ servers: nats.url });
    const lines: { level: number; msg: string; times?: number }[] = [];
    const logger = createLogger({
      actor: "test",
      destination: new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
          done();
        },
      }),
    });
    const drain = new AbortController();
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: "PULLS", subjects: ["pulls.>"] });
      await jsm.consumers.add("PULLS", { durable_name: "workers", ack_policy: AckPolicy.Explicit });
      const js = jetstream(nc);
      const taken: string[] = [];
      const pulling = pullJobs(await js.consumers.get("PULLS", "workers"), {
        clock: systemClock,
        logger,
        signal: drain.signal,
        room: () => 1,
        whenRoom: () => Promise.resolve(),
        take: (msg) => {
          taken.push(msg.subject);
          msg.ack();
        },
      });
      await systemClock.sleep(200);
      process.kill(nats.pid!, "SIGSTOP");
      try {
        // Long enough for several pulls to go silent in a row (each after two missed heartbeats).
        await systemClock.sleep(6_000);
      } finally {
        process.kill(nats.pid!, "SIGCONT");
      }
      await js.publish("pulls.job-1", "{}");
      for (let i = 0; i < 100 && taken.length === 0; i++) await systemClock.sleep(50);
      drain.abort();
      await pulling;

      expect(taken).toEqual(["pulls.job-1"]);
      const silent = lines.filter((l) => l.msg.includes("answered a job pull with nothing"));
      expect(silent).toHaveLength(1);
      expect(silent[0]).toMatchObject({ level: 40, times: 1 });
      const over = lines.filter((l) => l.msg.startsWith("job pulls answered again"));
      expect(over).toHaveLength(1);
      expect(over[0]?.level).toBe(30);
      expect(over[0]?.times).toBeGreaterThanOrEqual(2);
    } finally {
      drain.abort();
      if (!nc.isClosed()) await nc.close();
    }
  }, 30_000);
});
