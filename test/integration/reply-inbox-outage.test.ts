import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { remoteCritic } from "../../shared/bus/critic-client.js";
import { linkOf, whenLinked } from "../../shared/bus/link.js";
import { actorModelDriver } from "../../shared/bus/model-actor.js";
import { ReplyError, ReplyInbox } from "../../shared/bus/reply-inbox.js";
import { requestJson } from "../../shared/bus/request.js";
import { Subjects } from "../../shared/bus/subjects.js";
import type { LoopState } from "../../shared/loop/state.js";
import { toAgentError } from "../../shared/runtime/errors.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";
import { until } from "../helpers/until.js";

const data = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

/** Reconnects for ever as the actors' connections do (shared/bus/connect.ts), every `waitMs`. */
const reconnecting = (server: TestNats, waitMs: number): Promise<NatsConnection> =>
  connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: waitMs, reconnectJitter: 0 });

describe("ReplyInbox across a server restart", () => {
  let server: TestNats;
  let asker: NatsConnection;
  let answerer: NatsConnection;
  /** What the answerer was asked, in order. */
  const asked: string[] = [];

  beforeAll(async () => {
    // Its own server: the test crashes it.
    server = await startNats({ own: true });
    // The answerer mostly comes back first; when it does not, the asker's request finds nobody.
    [asker, answerer] = await Promise.all([reconnecting(server, 400), reconnecting(server, 50)]);
    answerer.subscribe("outage.echo", {
      callback: (_e, m) => {
        asked.push(text(m.data));
        m.respond(data(`echo ${text(m.data)}`));
      },
    });
    await answerer.flush();
  }, 30_000);

  /**
   * Both connections back, and the server has processed what each sent on reconnecting (the
   * answerer's subscriptions): a machine under load can take seconds over it after a restart, and a
   * test must not start, or ask, in the middle of the last one's.
   */
  const bothBack = async (): Promise<void> => {
    await until(() => linkOf(asker).connected() && linkOf(answerer).connected(), 20_000, {
      what: "both connections back",
    });
    await Promise.all([asker.flush(), answerer.flush()]);
  };

  beforeEach(bothBack, 30_000);

  afterAll(async () => {
    await asker?.close();
    await answerer?.close();
    await server?.stop();
  });

  it("a request in flight when the connection drops fails at once; one made while it is down goes out once it is back, and is answered", async () => {
    const inbox = ReplyInbox.of(asker);
    expect(text((await inbox.request("outage.echo", data("before"), { timeoutMs: 2_000 })).data)).toBe(
      "echo before",
    );
    // Nobody answers this one: it is in flight when the server dies.
    const inFlight = inbox.request("outage.silent", data("lost"), { timeoutMs: 20_000 });
    const restarted = server.restart?.({ downMs: 1_500 });
    expect(restarted).toBeDefined();
    await expect(inFlight).rejects.toMatchObject({ name: "ReplyError", reason: "disconnected" });
    await until(() => !linkOf(asker).connected(), 5_000, { what: "the asker sees the drop" });
    // The client drops what is published while it reconnects: this request must wait for the link.
    const t0 = performance.now();
    const during = inbox.request("outage.echo", data("during"), { timeoutMs: 15_000 }).then(
      (reply) => text(reply.data),
      (err: unknown) => (err instanceof ReplyError ? err.reason : String(err)),
    );
    await restarted;
    // It went out after the restart, long before its own timeout: answered, or (when the answerer
    // had not resubscribed yet) refused by the server at once. Lost, it would have timed out.
    expect(["echo during", "no-responders"]).toContain(await during);
    expect(performance.now() - t0).toBeLessThan(10_000);
    await bothBack();
    expect(text((await inbox.request("outage.echo", data("after"), { timeoutMs: 2_000 })).data)).toBe(
      "echo after",
    );
  }, 40_000);

  it("a publish made while the connection is down is dropped by the client; one made through whenLinked goes out once it is back", async () => {
    const heard: string[] = [];
    // On the asker's own connection, which subscribes again before it sends anything new.
    asker.subscribe("outage.note", { callback: (_e, m) => void heard.push(text(m.data)) });
    await asker.flush();
    const restarted = server.restart?.({ downMs: 1_500 });
    await until(() => !linkOf(asker).connected(), 5_000, { what: "the asker sees the drop" });
    asker.publish("outage.note", data("plain"));
    whenLinked(asker, () => asker.publish("outage.note", data("linked")));
    await restarted;
    await until(() => linkOf(asker).connected(), 5_000, { what: "the asker is back" });
    await asker.flush();
    await until(() => heard.includes("linked"), 5_000, { what: "the linked publish arrives" });
    // The client's own behaviour, which whenLinked and ReplyInbox work around.
    expect(heard).toEqual(["linked"]);
  }, 40_000);

  it("a request made while the connection is down still fails at its own deadline if the link stays down", async () => {
    const inbox = ReplyInbox.of(asker);
    const restarted = server.restart?.({ downMs: 2_500 });
    await until(() => !linkOf(asker).connected(), 5_000, { what: "the asker sees the drop" });
    const t0 = performance.now();
    await expect(inbox.request("outage.echo", data("late"), { timeoutMs: 500 })).rejects.toMatchObject({
      reason: "timeout",
    });
    expect(performance.now() - t0).toBeLessThan(1_500);
    await restarted;
    // Failed before the link came back, it is never sent: its caller has given up on it.
    await bothBack();
    await inbox.request("outage.echo", data("after the outage"), { timeoutMs: 2_000 });
    expect(asked).not.toContain("late");
    expect(asked).toContain("after the outage");
  }, 40_000);

  it("a read waiting for its service is asked again when the connection drops before its reply; another request is not (its outcome is unknown)", async () => {
    const slowAsked: string[] = [];
    // Answers a second after it is asked: the server is restarted meanwhile, and the reply is lost.
    answerer.subscribe("outage.slow", {
      callback: (_e, m) => {
        const asked = JSON.parse(text(m.data)) as string;
        slowAsked.push(asked);
        setTimeout(() => m.respond(data(JSON.stringify(`slow ${asked}`))), 1_000);
      },
    });
    await answerer.flush();
    const Text = z.string();
    const resent: string[] = [];
    const ask = async (value: string, read: boolean): Promise<string> => {
      try {
        const reply = await requestJson(asker, "outage.slow", { schema: Text, value }, Text, {
          timeoutMs: 5_000,
          wait: {
            waitMs: 15_000,
            clock: systemClock,
            random: seededRandom(3),
            repeatable: read,
            onResend: () => resent.push(value),
          },
        });
        return String(reply);
      } catch (err) {
        return toAgentError(err).code;
      }
    };
    const asRead = ask("read", true);
    const notRead = ask("write", false);
    await until(() => slowAsked.length === 2, 5_000, { what: "both asked" });
    await server.restart?.({ downMs: 500 });
    // The read is asked again once both are back, and answered; the other failed at the drop.
    expect(await notRead).toBe("BUS_UNAVAILABLE");
    expect(await asRead).toBe("slow read");
    expect(slowAsked.filter((v) => v === "read").length).toBeGreaterThanOrEqual(2);
    expect(slowAsked.filter((v) => v === "write")).toHaveLength(1);
    // The read's caller is told its copy may have been carried out before (see askUntilDecided).
    expect(resent[0]).toBe("read");
    expect(resent).not.toContain("write");
  }, 40_000);

  it("a model actor's turn and a critic's review, in flight past their wait for a service when the connection drops, are asked again and answered (neither has a side effect)", async () => {
    const subjects = new Subjects("outage");
    const asked = { turns: 0, reviews: 0 };
    const later = (m: { respond(d: Uint8Array): boolean }, reply: unknown): void =>
      void setTimeout(() => m.respond(data(JSON.stringify(reply))), 2_000);
    const usage = { inputTokens: 1, outputTokens: 1 };
    const response = { text: "done", toolCalls: [], stopReason: "endTurn", usage, costUsd: 0, model: "m" };
    const verdict = { scores: { correctness: 1 }, defects: [], repairHints: [], passed: true };
    answerer.subscribe(subjects.model("m"), {
      callback: (_e, m) => {
        asked.turns += 1;
        later(m, { schemaVersion: 1, ok: true, response });
      },
    });
    answerer.subscribe(subjects.criticReview(), {
      callback: (_e, m) => {
        asked.reviews += 1;
        later(m, { schemaVersion: 1, ok: true, verdict });
      },
    });
    await answerer.flush();
    // Shorter than the answers take: the wait counts from the drop, not from the ask.
    const wait = { waitMs: 1_000, clock: systemClock, random: seededRandom(4) };
    const turn = actorModelDriver({ provider: "actor", name: "m" }, { nc: asker, subjects, wait })
      .complete({ messages: [{ role: "user", content: "hi" }], tools: [], maxTokens: 10 })
      .then(
        (r) => r.text,
        (err: unknown) => toAgentError(err).code,
      );
    const state = { spec: { critic: { checks: [] }, agent: { privacy: "sovereign" } }, critiques: 1 };
    const review = remoteCritic(
      { nc: asker, subjects, wait },
      state as unknown as LoopState,
    )({
      schemaVersion: 1,
      runId: "r",
      task: "t",
      output: "o",
      evidence: [],
      rubric: { dimensions: [{ name: "correctness", weight: 1, min: 0.5 }], threshold: 0.5 },
    }).then(
      (v) => v.passed,
      (err: unknown) => toAgentError(err).code,
    );
    await until(() => asked.turns === 1 && asked.reviews === 1, 5_000, { what: "both asked" });
    await systemClock.sleep(1_200);
    await server.restart?.({ downMs: 300 });
    // Before, both failed at the drop: the run's turn failed it (modelError), the review sent a
    // good answer back for repair.
    expect(await turn).toBe("done");
    expect(await review).toBe(true);
    expect(asked).toEqual({ turns: 2, reviews: 2 });
  }, 40_000);
});
