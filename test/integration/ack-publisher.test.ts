import { JetStreamApiError } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { AckPublisher, PublishAckError } from "../../shared/bus/ack-publisher.js";
import { useBusSuite } from "../helpers/bus-suite.js";

const suite = useBusSuite("ap");
const data = (text: string): Uint8Array => new TextEncoder().encode(text);

/** A file stream of the suite's own on `<prefix>.ap.>`. */
async function stream(): Promise<{ name: string; subject: (s: string) => string }> {
  const name = `${suite.subjects.streams().log}_AP`;
  const base = `${suite.subjects.prefix}.ap`;
  await suite.jsm.streams.add({ name, subjects: [`${base}.>`], storage: "file" });
  return { name, subject: (s) => `${base}.${s}` };
}

describe("AckPublisher", () => {
  it("resolves with the stream's ack; a repeated message id is acked as a duplicate of the stored one", async () => {
    const { name, subject } = await stream();
    const publisher = AckPublisher.of(suite.nc);
    const first = await publisher.publish(subject("a"), data("one"), { msgID: "m1" });
    expect(first).toMatchObject({ stream: name, seq: 1, duplicate: false });
    const again = await publisher.publish(subject("a"), data("one"), { msgID: "m1" });
    expect(again).toMatchObject({ stream: name, seq: 1, duplicate: true });
    // Many in flight at once: each gets its own ack, in order.
    const acks = await Promise.all(
      Array.from({ length: 50 }, (_, i) => publisher.publish(subject("b"), data(String(i)))),
    );
    expect(acks.map((a) => a.seq)).toEqual(Array.from({ length: 50 }, (_, i) => i + 2));
    const stored = await suite.jsm.streams.getMessage(name, { seq: 27 });
    expect(new TextDecoder().decode(stored?.data)).toBe("25");
  });

  it("a wrong expected subject sequence is the stream's error 10071, as the WAL's fencing expects", async () => {
    // Adding the same stream again is a no-op.
    const { subject } = await stream();
    const publisher = AckPublisher.of(suite.nc);
    const ok = await publisher.publish(subject("fenced"), data("x"), { expectLastSubjectSequence: 0 });
    const stale = publisher.publish(subject("fenced"), data("y"), { expectLastSubjectSequence: 0 });
    await expect(stale).rejects.toBeInstanceOf(JetStreamApiError);
    await expect(stale).rejects.toMatchObject({ code: 10071 });
    const next = await publisher.publish(subject("fenced"), data("z"), { expectLastSubjectSequence: ok.seq });
    expect(next.seq).toBeGreaterThan(ok.seq);
  });

  it("no stream on the subject is `no-responders`; no answer at all fails after the timeout; both are transient", async () => {
    const publisher = AckPublisher.of(suite.nc);
    const nowhere = publisher.publish(`${suite.subjects.prefix}.nostream.x`, data("x"), { msgID: "n1" });
    await expect(nowhere).rejects.toMatchObject({ name: "PublishAckError", reason: "no-responders" });
    // A subscriber that never answers: the server sees interest, so only the sweep ends the wait.
    const nc = await connect({ servers: suite.server.url, ...credentials() });
    try {
      const silent = nc.subscribe(`${suite.subjects.prefix}.silent`);
      await nc.flush();
      const slow = AckPublisher.of(nc, 300);
      const t0 = performance.now();
      const lost = slow.publish(`${suite.subjects.prefix}.silent`, data("x"));
      await expect(lost).rejects.toBeInstanceOf(PublishAckError);
      await expect(lost).rejects.toMatchObject({ reason: "timeout" });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
      silent.unsubscribe();
    } finally {
      await nc.close();
    }
  });

  it("a message the client cannot send (over max_payload) is rejected with the client's own error", async () => {
    const publisher = AckPublisher.of(suite.nc);
    const huge = new Uint8Array((suite.nc.info?.max_payload ?? 1_048_576) + 1);
    await expect(publisher.publish(`${suite.subjects.prefix}.ap.big`, huge)).rejects.toThrow(/max_payload/);
  });
});

function credentials(): { user?: string; pass?: string } {
  return suite.server.user ? { user: suite.server.user, pass: suite.server.pass ?? "" } : {};
}
