import { Kvm } from "@nats-io/kv";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { decode, encode } from "../../shared/bus/codec.js";
import { ReplyInbox } from "../../shared/bus/reply-inbox.js";
import { IdempotencyRecord, idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import { serveTool } from "../../shared/bus/tool-service.js";
import { ToolCallReply, ToolCallRequest } from "../../shared/contracts/tool.js";
import { systemClock, type Clock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { ToolInvoker } from "../../shared/tools/invoke.js";
import { defineTool } from "../../shared/tools/tool.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { connectThrough, startCuttingProxy } from "../helpers/cutting-proxy.js";

/** Its own server: the test crashes it while a tool runs. */
const suite = useBusSuite("tso", { own: true });

describe("a tool service across a JetStream outage", () => {
  it("a call whose tool finishes while the server is down records its outcome once it is back: a repeat gets that reply, and the tool ran once", async () => {
    let runs = 0;
    let started: () => void = () => undefined;
    const running = new Promise<void>((resolve) => (started = resolve));
    const pay = defineTool({
      name: "pay_once",
      description: "a side effect that finishes during the outage",
      input: z.object({ cents: z.number() }),
      capability: { kind: "compute" },
      reversibility: "irreversible",
      idempotent: false,
      execute: async (input) => {
        runs += 1;
        started();
        await systemClock.sleep(1_000);
        return { output: { paid: input.cents } };
      },
    });
    serveTool(pay, {
      nc: suite.nc,
      subjects: suite.subjects,
      idempotency: suite.buckets.idempotency,
      invoker: new ToolInvoker({ clock: systemClock, random: seededRandom(1), policy: { retries: 0 } }),
      clock: systemClock,
      random: seededRandom(2),
      logger: silentLogger,
    });
    await suite.nc.flush();
    const request: ToolCallRequest = {
      schemaVersion: 1,
      runId: "r1",
      actionId: "a1",
      idempotencyKey: "r1:a1",
      input: { cents: 250 },
      deadline: Date.now() + 60_000,
    };
    const body = encode(ToolCallRequest, request);
    const inbox = ReplyInbox.of(suite.nc);
    const subject = suite.subjects.tool("pay_once");
    const first = inbox.request(subject, body, { timeoutMs: 30_000 }).catch((err: unknown) => err);
    await running;
    // The server dies while the tool runs and stays down past its end: the outcome is known here
    // only, until the bucket takes it.
    await suite.server.restart?.({ downMs: 2_500 });
    expect(await first).toMatchObject({ name: "ReplyError", reason: "disconnected" });
    const key = idempotencyBucketKey("pay_once", request.idempotencyKey);
    let record: IdempotencyRecord | undefined;
    for (let waited = 0; record?.status !== "done"; waited += 200) {
      expect(waited, `the outcome was not recorded: ${JSON.stringify(record)}`).toBeLessThan(15_000);
      await systemClock.sleep(200);
      const entry = await suite.buckets.idempotency.get(key).catch(() => null);
      record = entry?.operation === "PUT" ? decode(IdempotencyRecord, entry.value) : undefined;
    }
    expect(record).toMatchObject({ status: "done", reply: { ok: true, output: { paid: 250 } } });
    const again = decode(ToolCallReply, (await inbox.request(subject, body, { timeoutMs: 5_000 })).data);
    expect(again).toEqual({ ok: true, output: { paid: 250 } });
    expect(runs).toBe(1);
  }, 60_000);

  it.each([
    {
      lost: "the claim's ack",
      deadlineMs: 120_000,
      skewMs: 20_000,
      reply: { ok: true, output: { paid: 300 } },
      runs: 1,
      record: "done",
    },
    // The caller stopped waiting while the service was cut off: the call does not run, and the
    // claim is freed (not left running for nobody).
    {
      lost: "the claim's ack",
      deadlineMs: 10_000,
      skewMs: 16_000,
      reply: { ok: false, error: { code: "TOOL_TIMEOUT" } },
      runs: 0,
      record: "none",
    },
    // The tool failed, retryably: its claim is freed for the caller's retry, the free sent again.
    {
      lost: "the free of the claim",
      deadlineMs: 120_000,
      skewMs: 20_000,
      reply: { ok: false, error: { code: "TOOL_UNAVAILABLE" } },
      runs: 1,
      record: "none",
    },
  ])(
    "$lost lost, the service cut off for $skewMs ms, the caller's deadline $deadlineMs ms away: the call's record ends $record, not running for nobody",
    async ({ lost, deadlineMs, skewMs, reply, runs: expectedRuns, record: expected }) => {
      const name = `pay_cut_${deadlineMs}_${reply.ok}`;
      const bucket = suite.subjects.buckets().idempotency;
      // The service reaches the server through a proxy that cuts it off when it writes the call's
      // record (the claim, forwarded; or its free, lost), and its clock runs ahead by the outage
      // (the 15 s of a bus retry, without waiting them).
      const proxy = await startCuttingProxy(suite.server.url);
      let onCut: () => void = () => undefined;
      const wasCut = new Promise<void>((resolve) => (onCut = resolve));
      const freeLost = lost === "the free of the claim";
      const armCut = (): void =>
        void proxy.cutOn(`$KV.${bucket}.${name}.`, { forward: !freeLost }).then(onCut);
      let runs = 0;
      const pay = defineTool({
        name,
        description: "a side effect whose record's write is cut off",
        input: z.object({ cents: z.number() }),
        capability: { kind: "compute" },
        reversibility: "irreversible",
        idempotent: false,
        execute: (input) => {
          runs += 1;
          if (!freeLost) return Promise.resolve({ output: { paid: input.cents } });
          armCut();
          return Promise.reject(new AgentError("TOOL_UNAVAILABLE", "the payment provider is down"));
        },
      });
      let skew = 0;
      const clock: Clock = {
        now: () => Date.now() + skew,
        sleep: (ms, signal) => systemClock.sleep(ms, signal),
      };
      const nc = await connectThrough(proxy, suite.server);
      try {
        serveTool(pay, {
          nc,
          subjects: suite.subjects,
          idempotency: await new Kvm(nc).open(bucket),
          invoker: new ToolInvoker({ clock, random: seededRandom(1), policy: { retries: 0 } }),
          clock,
          random: seededRandom(2),
          logger: silentLogger,
        });
        await nc.flush();
        const request: ToolCallRequest = {
          schemaVersion: 1,
          runId: "r2",
          actionId: `a${deadlineMs}`,
          idempotencyKey: `r2:${name}`,
          input: { cents: 300 },
          deadline: Date.now() + deadlineMs,
        };
        if (!freeLost) armCut();
        const answer = ReplyInbox.of(suite.nc).request(
          suite.subjects.tool(name),
          encode(ToolCallRequest, request),
          {
            timeoutMs: 20_000,
          },
        );
        await wasCut;
        skew = skewMs;
        // Past the 5 s a write waits for its ack: the old claim (and free) gave up then.
        await systemClock.sleep(6_000);
        proxy.admit();
        expect(decode(ToolCallReply, (await answer).data)).toMatchObject(reply);
        expect(runs).toBe(expectedRuns);
        const entry = await suite.buckets.idempotency.get(idempotencyBucketKey(name, request.idempotencyKey));
        const held = entry?.operation === "PUT" ? decode(IdempotencyRecord, entry.value).status : "none";
        expect(held).toBe(expected);
      } finally {
        await nc.close();
        await proxy.close();
      }
    },
    40_000,
  );
});
