import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode, encode } from "../../shared/bus/codec.js";
import { idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import { serve } from "../../shared/bus/serve.js";
import { serveToolsOf } from "../../shared/bus/tool-service.js";
import { ToolCallReply, ToolCallRequest } from "../../shared/contracts/tool.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { defineTool } from "../../shared/tools/tool.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { connectRetrying } from "../helpers/nats-server.js";

/**
 * An actor stopped gracefully (SIGTERM: a rolling restart) finishes the requests it has taken
 * before its connection drains. Before, a handler still at work had its own requests refused
 * ("connection draining"): a supervisor answered a lease with that error, and a tool service never
 * recorded a call's outcome, so the run waited out the tool's timeout and halted for a human.
 */
const suite = useBusSuite("graceful");
/** The stopping actor's own connection; the suite's stays up and asks. */
let actor: NatsConnection;
beforeAll(async () => {
  actor = await connectRetrying(suite.server, 250);
});
afterAll(async () => {
  if (!actor.isClosed()) await actor.close();
});

const Reply = z.object({ ok: z.boolean(), read: z.string().optional(), error: z.string().optional() });

describe("an actor stopped while it answers a request", () => {
  it("a served endpoint takes no more requests, answers the one under way (its own reads included), then the connection drains", async () => {
    const kv = suite.buckets.memory;
    await kv.put("setting", "on");
    let started = 0;
    const endpoint = serve(actor, `${suite.subjects.prefix}.graceful.ask`, {
      queue: "graceful",
      reply: Reply,
      logger: silentLogger,
      handle: async () => {
        started += 1;
        await systemClock.sleep(300);
        // The handler's own request, made while its actor stops.
        return { ok: true, read: (await kv.get("setting"))?.string() };
      },
      onError: (err) => ({ ok: false, error: String(err) }),
    });
    await actor.flush();
    const asked = suite.nc.request(`${suite.subjects.prefix}.graceful.ask`, undefined, { timeout: 5_000 });
    await systemClock.sleep(100);
    expect(started).toBe(1);
    await endpoint.stop();
    await actor.drain();
    expect(decode(Reply, (await asked).data)).toEqual({ ok: true, read: "on" });
  });

  it("a tool service finishes the call under way and records its outcome before its connection drains", async () => {
    const sub = await connectRetrying(suite.server, 250);
    const pay = defineTool({
      name: "slow_charge",
      description: "Charges, slowly.",
      input: z.object({ amount: z.number() }),
      capability: { kind: "compute" },
      reversibility: "irreversible",
      idempotent: false,
      timeoutMs: 5_000,
      execute: async (input) => {
        await systemClock.sleep(300);
        return { output: { charged: input.amount } };
      },
    });
    // The service's bucket goes through its own connection, as a tool actor's does.
    const idempotency = await new Kvm(sub).open(suite.subjects.buckets().idempotency);
    const bus = {
      ...suite,
      clock: systemClock,
      nc: sub,
      buckets: { ...suite.buckets, idempotency } as ActorBus["buckets"],
    };
    const served = serveToolsOf([pay], bus, { logger: silentLogger });
    await sub.flush();
    const request: ToolCallRequest = {
      schemaVersion: 1,
      runId: "run-graceful",
      actionId: "act-1",
      idempotencyKey: "run-graceful:act-1",
      input: { amount: 7 },
      deadline: Date.now() + 10_000,
    };
    const asked = suite.nc.request(suite.subjects.tool("slow_charge"), encode(ToolCallRequest, request), {
      timeout: 5_000,
    });
    await systemClock.sleep(100);
    await served.stop();
    await sub.drain();
    const reply = decode(ToolCallReply, (await asked).data);
    expect(reply, JSON.stringify(reply)).toMatchObject({ ok: true, output: { charged: 7 } });
    const record = await suite.buckets.idempotency.get(
      idempotencyBucketKey("slow_charge", request.idempotencyKey),
    );
    expect(record?.json()).toMatchObject({ status: "done", reply: { ok: true } });
  });
});
