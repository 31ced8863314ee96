import { describe, expect, it } from "vitest";
import { z } from "zod";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import { encode } from "../../shared/bus/codec.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { defineTool } from "../../shared/tools/tool.js";
import { settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

/**
 * Workers beat to each other, so a dead worker's runs move on in about a second, long before the
 * job's ack wait (the production default, 30 s, here) would hand them over.
 */
const suite = useClusterSuite("presence", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  env: { AGENT_ACK_WAIT_MS: "30000", AGENT_RETRY_DELAY_MS: "500", AGENT_STATUS_EVERY_MS: "0" },
});

describe("worker presence: a silent worker's jobs go back to the queue at once", () => {
  it("kill -9 of the worker mid-tool: the other resumes the run within seconds (ack wait 30 s), the side effect once", async () => {
    const executions = new Map<string, number>();
    let onStart: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (onStart = resolve));
    suite.serveTool(
      defineTool({
        name: "transfer",
        description: "Moves money (a side effect that must happen once).",
        input: z.object({ amount: z.number() }),
        capability: { kind: "compute" },
        reversibility: "irreversible",
        idempotent: false,
        execute: async (input, ctx) => {
          executions.set(ctx.idempotencyKey, (executions.get(ctx.idempotencyKey) ?? 0) + 1);
          onStart();
          await systemClock.sleep(1_500);
          return { output: { moved: input.amount } };
        },
      }),
    );
    const reply = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "transfer", input: { amount: 3 } }] },
          { toolCalls: [{ name: "finish", input: { answer: "moved 3" } }] },
        ],
        tools: ["transfer"],
      }),
    );
    await started;
    // A beat names the jobs held when it is sent: one taken since the last beat waits out the ack wait.
    await systemClock.sleep(400);
    const holder = await suite.lastWriter(reply.runId);
    expect(holder).toMatch(/^agent-\d$/);
    suite.cluster.signal(holder as string, "SIGKILL");
    const killedAt = Date.now();

    const status = await suite.waitFor(reply.runId, settled, 25_000);
    const tookMs = Date.now() - killedAt;
    expect(status).toMatchObject({ status: "committed", terminal: { output: "moved 3" } });
    expect(tookMs).toBeLessThan(10_000);
    expect([...executions.values()]).toEqual([1]);
    const events = await suite.audit(reply.runId);
    expect(events.filter((e) => e.kind === "run.resumed")).toHaveLength(1);
    const survivor = holder === "agent-1" ? "agent-2" : "agent-1";
    expect(await suite.log(survivor)).toMatch(/"jobs":1[^\n]*stopped beating/);
    await suite.cluster.start("agent", `${holder as string}b`);
  }, 60_000);

  it("a beat nobody can read is logged and ignored; a forged beat cannot make a worker NAK anything but jobs", async () => {
    const { nc, subjects } = suite.bus;
    nc.publish(subjects.workerBeat("forged"), new TextEncoder().encode("{not json"));
    const forged: WorkerBeat = {
      schemaVersion: 1,
      workerId: "forger",
      instance: "forged-1",
      deadAfterMs: 200,
      jobs: ["$JS.ACK.SOMEONE_ELSES_STREAM.consumer.1.1.1.0.0"],
    };
    nc.publish(subjects.workerBeat(forged.instance), encode(WorkerBeat, forged));
    await systemClock.sleep(1_000);
    const logs = await suite.logs();
    expect(logs).toMatch(/unreadable worker beat ignored/);
    expect(logs).toMatch(/"worker":"forger"[^\n]*"jobs":0[^\n]*stopped beating/);

    const reply = await suite.client.submit(spec({ script: [{ text: "still here" }], tools: [] }));
    const status = await suite.waitFor(reply.runId, settled, 20_000);
    expect(status).toMatchObject({ status: "committed" });
  }, 30_000);
});
