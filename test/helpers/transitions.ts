import { transition } from "../../shared/loop/fsm.js";
import type { LoopConfig, Transition } from "../../shared/loop/state.js";

type EffectType = Transition["effects"][number]["type"];

/** The transition's first effect of a type (undefined when it has none, though typed as found). */
export const effectOf = <T extends EffectType>(t: Transition, type: T) =>
  t.effects.find((e) => e.type === type) as Extract<Transition["effects"][number], { type: T }>;

/** The model call the run waits on, answered with one call of `call.name`. */
export function toolTurn(
  t: Transition,
  call: { name: string; input: object },
  config: LoopConfig,
): Transition {
  return transition(
    t.state,
    {
      type: "modelResponded",
      at: 1,
      requestId: effectOf(t, "callModel").requestId,
      response: {
        text: "",
        toolCalls: [{ id: `c-${call.name}`, ...call }],
        stopReason: "toolUse",
        usage: { inputTokens: 0, outputTokens: 0 },
        costUsd: 0,
        model: "m",
      },
    },
    config,
  );
}
