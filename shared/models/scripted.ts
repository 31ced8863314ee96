import type { ModelRequest, ModelResponse, ScriptStep, ScriptedModelRef } from "../contracts/model.js";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { ModelDriver } from "./driver.js";

/**
 * The deterministic model: returns the script's steps in order (starting over when `loop` is
 * set, failing with SCRIPT_EXHAUSTED otherwise). It ships with the product for demos and for
 * users' own tests; tool-call ids are derived from the call position, so runs are reproducible.
 */
export class ScriptedDriver implements ModelDriver {
  readonly id = "scripted";
  readonly locality = "local" as const;
  private position = 0;
  readonly requests: ModelRequest[] = [];

  constructor(
    private readonly ref: Pick<ScriptedModelRef, "script" | "loop">,
    private readonly clock?: Clock,
  ) {}

  /** Continue from step `n` (a resumed run that already consumed `n` recorded responses). */
  seek(n: number): void {
    this.position = n;
  }

  async complete(request: ModelRequest, signal?: AbortSignal): Promise<ModelResponse> {
    this.requests.push(request);
    const index = this.position;
    const step = this.stepAt(index);
    this.position++;
    if (step.delayMs && this.clock) await this.clock.sleep(step.delayMs, signal);
    return toResponse(step, index);
  }

  private stepAt(index: number): ScriptStep {
    const { script } = this.ref;
    if (index >= script.length && !this.ref.loop) {
      throw new AgentError(
        "SCRIPT_EXHAUSTED",
        `the script has ${script.length} steps and step ${index + 1} was asked for`,
      );
    }
    return script[index % script.length] as ScriptStep;
  }
}

function toResponse(step: ScriptStep, index: number): ModelResponse {
  const toolCalls = (step.toolCalls ?? []).map((call, i) => ({
    id: `call_${index + 1}_${i + 1}`,
    name: call.name,
    input: call.input ?? {},
  }));
  return {
    text: step.text ?? "",
    toolCalls,
    stopReason: step.stopReason ?? (toolCalls.length > 0 ? "toolUse" : "endTurn"),
    usage: step.usage ?? { inputTokens: 0, outputTokens: 0 },
    costUsd: step.costUsd ?? 0,
    model: "scripted",
  };
}
