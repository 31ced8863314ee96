import { describe, expect, it } from "vitest";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import type { CancelEvent } from "../../shared/contracts/loop-event.js";
import { startRun, transition } from "../../shared/loop/fsm.js";
import type { LoopConfig, LoopState } from "../../shared/loop/state.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { describeTool } from "../../shared/tools/tool.js";
import { CANCEL_SETTLE_WAIT_MS, settleHaltedCall } from "../../services/agent/settle-call.js";
import { bookingTools } from "../helpers/bookings.js";
import { spec } from "../helpers/fixtures.js";
import { toolTurn } from "../helpers/transitions.js";
import { useActorBus } from "../helpers/actor-bus.js";

const suite = useActorBus("sc");

// Described, never served: the call's tool service is down for the whole suite.
const config: LoopConfig = { tools: bookingTools().tools.map((t) => describeTool(t)) };

/** A run halted while its booking ran. */
function haltedMidBooking(): LoopState {
  const s = RunSpec.parse(spec({ tools: ["book", "unbook"] }));
  let t = startRun({ type: "start", at: 0, spec: s, runId: "r", rootRunId: "r", depth: 0 }, config);
  t = transition(t.state, { type: "memoryRecalled", at: 1, memories: [] }, config);
  t = toolTurn(t, { name: "book", input: { item: "room 1" } }, config);
  t = transition(t.state, { type: "halt", at: 2, reason: "stop", by: "ops" }, config);
  expect(t.state.phase).toBe("HALT");
  return t.state;
}

const cancel: CancelEvent = { type: "cancel", at: 3, reason: "double booking", by: "oncall" };

const settle = (queuedAt?: number, cancelSettleWaitMs?: number) =>
  settleHaltedCall(haltedMidBooking(), cancel, {
    bus: suite.bus,
    config,
    logger: silentLogger,
    stopping: new AbortController().signal,
    requestTimeoutMs: 200,
    ...(queuedAt === undefined ? {} : { queuedAt }),
    ...(cancelSettleWaitMs === undefined ? {} : { cancelSettleWaitMs }),
  });

describe("a cancel whose call's tool service does not answer", () => {
  it("is handed back (TOOL_UNAVAILABLE, retryable) while it was queued less than CANCEL_SETTLE_WAIT_MS ago", async () => {
    await expect(settle(Date.now() - 60_000)).rejects.toMatchObject({
      code: "TOOL_UNAVAILABLE",
      retryable: true,
      message: expect.stringContaining("the cancel waits for it (60 s so far)") as unknown,
      details: { handedBack: "cancel" },
    });
  });

  it("leaves the call to a human once it has waited that long (the cancel goes on without what the call did)", async () => {
    expect(await settle(Date.now() - CANCEL_SETTLE_WAIT_MS)).toEqual(cancel);
  });

  it("waits as long as AGENT_CANCEL_SETTLE_WAIT_MS says: a minute ago is past a 30 s setting, and within a 2-minute one", async () => {
    expect(await settle(Date.now() - 60_000, 30_000)).toEqual(cancel);
    await expect(settle(Date.now() - 60_000, 120_000)).rejects.toMatchObject({ code: "TOOL_UNAVAILABLE" });
  });

  it("leaves it to a human at once when it cannot tell when the cancel was queued", async () => {
    expect(await settle()).toEqual(cancel);
  });
});
