import { describe, expect, it } from "vitest";
import { ReplyError, ReplyInbox } from "../../shared/bus/reply-inbox.js";
import { useBusSuite } from "../helpers/bus-suite.js";

const suite = useBusSuite("ri");
const data = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

describe("ReplyInbox: every reply of a connection on one subscription", () => {
  it("each request gets its own reply, however many are in flight", async () => {
    const subject = `${suite.subjects.prefix}.double`;
    const sub = suite.nc.subscribe(subject, {
      callback: (_e, m) => void m.respond(data(String(Number(text(m.data)) * 2))),
    });
    await suite.nc.flush();
    const inbox = ReplyInbox.of(suite.nc);
    const replies = await Promise.all(
      Array.from({ length: 100 }, (_, i) => inbox.request(subject, data(String(i)), { timeoutMs: 2_000 })),
    );
    expect(replies.map((m) => Number(text(m.data)))).toEqual(Array.from({ length: 100 }, (_, i) => i * 2));
    sub.unsubscribe();
  });

  it("each request keeps its own timeout: a short one sent after a long one fails on time", async () => {
    const subject = `${suite.subjects.prefix}.silent`;
    const silent = suite.nc.subscribe(subject);
    await suite.nc.flush();
    const inbox = ReplyInbox.of(suite.nc);
    const long = inbox.request(subject, data("long"), { timeoutMs: 3_000 });
    const t0 = performance.now();
    const short = inbox.request(subject, data("short"), { timeoutMs: 200 });
    await expect(short).rejects.toBeInstanceOf(ReplyError);
    await expect(short).rejects.toMatchObject({ reason: "timeout" });
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(195);
    expect(waited).toBeLessThan(1_000);
    await expect(long).rejects.toMatchObject({ reason: "timeout" });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(2_900);
    silent.unsubscribe();
  });

  it("nobody subscribed is `no-responders`, at once", async () => {
    const t0 = performance.now();
    await expect(
      ReplyInbox.of(suite.nc).request(`${suite.subjects.prefix}.nobody`, data("x"), { timeoutMs: 5_000 }),
    ).rejects.toMatchObject({ name: "ReplyError", reason: "no-responders" });
    expect(performance.now() - t0).toBeLessThan(1_000);
  });
});
