import { describe, expect, it } from "vitest";
import { systemClock } from "../../shared/runtime/clock.js";
import { chargeRun, serveCharge, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { FAKE_WORKER_ACK_WAIT_MS, FAST_PRESENCE_ENV } from "../helpers/fake-worker.js";

/** One worker, the whole deployment: once it is killed, no live worker ever heard it beat. */
const suite = useClusterSuite("stray-arrival", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }],
  env: FAST_PRESENCE_ENV,
});

/** Resolves once `check` holds, checking every 100 ms; fails the test after `withinMs`. */
async function eventually(check: () => Promise<boolean>, withinMs: number): Promise<void> {
  for (let waited = 0; !(await check()); waited += 100) {
    expect(waited, `not within ${withinMs} ms`).toBeLessThan(withinMs);
    await systemClock.sleep(100);
  }
}

describe("every worker killed at once, new ones started after", () => {
  it("the newcomers find the dead workers' jobs once they have heard each other, and the run commits long before the ack wait, the side effect once", async () => {
    const charge = serveCharge(suite, 1_000, "refund");
    const reply = await chargeRun(suite, "refund", 4);
    await charge.started;
    suite.cluster.signal("agent-1", "SIGKILL");
    // Longer than a beat, shorter than the ack wait: the new deployment's pods come up.
    await systemClock.sleep(1_500);
    const startedAt = Date.now();
    await Promise.all([suite.cluster.start("agent", "agent-2"), suite.cluster.start("agent", "agent-3")]);

    const status = await suite.waitFor(reply.runId, settled, FAKE_WORKER_ACK_WAIT_MS / 2);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 4" } });
    expect(Date.now() - startedAt).toBeLessThan(15_000);
    expect([...charge.executions.values()]).toEqual([1]);
    const events = await suite.audit(reply.runId);
    expect(events.filter((e) => e.kind === "run.resumed")).toHaveLength(1);
    // agent-2 sorts first of the live workers whichever came up first, so it is the one that looks.
    const looked = await suite.log("agent-2");
    expect(looked).toMatch(/"live":\d[^\n]*workers gone before this one started/);
    expect(looked).toMatch(/"jobs":1[^\n]*never named by any worker/);
    // agent-3 looks only if it heard nobody (it came up a whole listening spell before agent-2).
    expect(await suite.log("agent-3")).not.toMatch(/"live":[1-9][^\n]*workers gone before/);
  }, 60_000);

  it("workers stalled for a newcomer's whole listening spell lose their run to it, safely: the stalled holder, fenced when it wakes, leaves the job to the newcomer; the run commits once, the side effect once", async () => {
    const charge = serveCharge(suite, 1_500, "rebate");
    const note = serveCharge(suite, 0, "note");
    // The holder wakes to a step of its own (a second call) and is fenced there; the last step
    // outlasts its wake-up by more than the retry delay (5 s) a fenced job used to be handed back with.
    const reply = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "rebate", input: { amount: 6 } }] },
          { toolCalls: [{ name: "note", input: { amount: 1 } }] },
          { toolCalls: [{ name: "finish", input: { answer: "charged 6" } }], delayMs: 8_000 },
        ],
        tools: ["rebate", "note"],
      }),
    );
    await charge.started;
    const holder = await suite.lastWriter(reply.runId);
    expect(holder).toMatch(/^agent-[23]$/);
    // Both stop (as with SIGSTOP or a frozen node): their connections stay, their beats stop.
    const stalled = ["agent-2", "agent-3"];
    for (const name of stalled) suite.cluster.signal(name, "SIGSTOP");
    try {
      await suite.cluster.start("agent", "agent-4");
      await eventually(async () => (await suite.lastWriter(reply.runId)) === "agent-4", 15_000);
    } finally {
      for (const name of stalled) suite.cluster.signal(name, "SIGCONT");
    }
    // Woken, the stalled holder's tool reply comes back and its append is refused: it lets go.
    const fenced = new RegExp(`"runId":"${reply.runId}"[^\\n]*fenced: another worker drives this run`);
    await eventually(async () => fenced.test(await suite.log(holder as string)), 10_000);
    const status = await suite.waitFor(reply.runId, settled, 30_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 6" } });
    expect([...charge.executions.values()]).toEqual([1]);
    expect([...note.executions.values()]).toEqual([1]);
    const events = await suite.audit(reply.runId);
    // One takeover: the fenced holder did not hand the job, which the newcomer holds, back again.
    expect(events.filter((e) => e.kind === "run.resumed")).toHaveLength(1);
    expect(events.filter((e) => e.kind === "run.committed")).toHaveLength(1);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(await suite.log("agent-4")).toMatch(/"jobs":1[^\n]*never named by any worker/);
  }, 60_000);
});
