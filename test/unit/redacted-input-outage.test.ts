import { describe, expect, it } from "vitest";
import { z } from "zod";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import type { LoopState, ToolCallEffect } from "../../shared/loop/state.js";
import { EffectPerformer } from "../../shared/loop/performer.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { ManualClock } from "../../shared/runtime/clock.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { ToolRegistry } from "../../shared/tools/registry.js";
import { defineTool } from "../../shared/tools/tool.js";
import { spec } from "../helpers/fixtures.js";

const vault = defineTool({
  name: "vault",
  description: "Opens the vault with a key.",
  input: z.object({ apiKey: z.string() }),
  capability: { kind: "compute" },
  reversibility: "irreversible",
  idempotent: false,
  redact: { paths: ["input.apiKey"] },
  execute: () => Promise.resolve({ output: { rows: 2 } }),
});
const state = { runId: "r1", spec: RunSpec.parse(spec({ tools: ["vault"] })) } as LoopState;
const effect: ToolCallEffect = {
  type: "callTool",
  actionId: "a1",
  tool: "vault",
  input: { apiKey: "[REDACTED]" },
  idempotencyKey: "k1",
  purpose: "act",
  timeoutMs: 1_000,
};

/** A performer whose redacted inputs' bucket answers a read with the given error. */
function performer(error: AgentError): EffectPerformer {
  return new EffectPerformer({
    registry: new ToolRegistry([vault]),
    clock: new ManualClock(0),
    random: seededRandom(1),
    toolInput: () => Promise.reject(error),
  });
}

describe("reading a redacted input kept outside the log", () => {
  it("a bucket out of reach fails the lease (the run is taken over), never answers the call for good", async () => {
    for (const code of ["BUS_UNAVAILABLE", "STORAGE_FULL"] as const) {
      const failed = performer(new AgentError(code, "the bucket is out of reach")).perform(effect, state);
      await expect(failed).rejects.toMatchObject({ code });
    }
  });

  it("an input no longer kept answers the call with REDACTED_INPUT_LOST", async () => {
    const event = await performer(new AgentError("REDACTED_INPUT_LOST", "gone")).perform(effect, state);
    expect(event).toMatchObject({
      type: "toolAborted",
      actionId: "a1",
      error: { code: "REDACTED_INPUT_LOST" },
    });
  });
});
