import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { JOB_PULL_MS, pullWentSilent } from "../../services/agent/worker.js";
import { startLocalNats } from "../../services/local/nats-server.js";
import { systemClock } from "../../shared/runtime/clock.js";

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
});
