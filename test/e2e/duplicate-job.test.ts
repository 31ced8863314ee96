import { describe, expect, it } from "vitest";
import { settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

/** The model's second answer takes this long: far past the stall threshold and the ack wait. */
const LONG_STEP_MS = 6_000;

/**
 * A step outlasting `SUPERVISOR_STALL_MS` gets its run a second job while its worker still drives
 * it (the supervisor cannot tell a long step from a stranded job). The stall re-queue comes later
 * into the step than the ack wait, as with the defaults (10 min against 30 s).
 */
const suite = useClusterSuite("duplicate-job", {
  actors: [
    { kind: "supervisor", env: { SUPERVISOR_STALL_MS: "1500" } },
    { kind: "agent", name: "agent-1" },
    { kind: "agent", name: "agent-2" },
    { kind: "tools", env: { TOOLS: "echo" } },
  ],
  env: {
    AGENT_ACK_WAIT_MS: "1000",
    AGENT_BEAT_MS: "250",
    AGENT_DEAD_AFTER_MS: "1000",
    AGENT_STATUS_EVERY_MS: "0",
  },
});

describe("a second job for a run a live worker drives", () => {
  it("is dropped: the run is not taken over, the long model call is made once, and the run commits", async () => {
    const reply = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "echo", input: { text: "first" } }] },
          { text: "done after a long think", delayMs: LONG_STEP_MS },
        ],
      }),
    );
    const status = await suite.waitFor(reply.runId, settled, 4 * LONG_STEP_MS);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "done after a long think" } });
    // The second job was made: the supervisor took the long step for a stall.
    expect(await suite.log("supervisor")).toMatch(
      new RegExp(`"runId":"${reply.runId}"[^\\n]*run stalled \\(no progress, no job\\): re-queued`),
    );
    const events = await suite.audit(reply.runId);
    expect(events.filter((e) => e.kind === "run.resumed")).toHaveLength(0);
    expect(events.filter((e) => e.kind === "model.called")).toHaveLength(2);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const dropped = new RegExp(`"runId":"${reply.runId}"[^\\n]*another copy of its job`);
    expect(dropped.test((await suite.log("agent-1")) + (await suite.log("agent-2")))).toBe(true);
  }, 60_000);
});
