import type { ActorBus } from "../../shared/bus/actor.js";
import { actorModelDriver } from "../../shared/bus/model-actor.js";
import type { ModelRef, ModelRequest } from "../../shared/contracts/model.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { canonicalJson } from "../../shared/runtime/canonical-json.js";
import { AgentError } from "../../shared/runtime/errors.js";

export interface ModelReplay {
  /** Model answers asked again and found identical to the record. */
  checked: number;
  /** Why nothing was asked again (a model that is not a deterministic actor). */
  skipped?: string;
}

/**
 * Asks a run's model again with every request the replay re-derived and checks each answer equals
 * the recorded one. Only a model served by an actor (a deterministic planner, say) is asked: a
 * hosted LLM is not expected to repeat itself, and a scripted model repeats by construction. A
 * request made after the run switched to its `escalation` model is that model's to answer.
 */
export async function replayModels(
  bus: Pick<ActorBus, "nc" | "subjects">,
  model: ModelRef,
  records: readonly WalRecord[],
  requests: readonly { requestId: string; request: ModelRequest; escalated?: true }[],
  escalation?: ModelRef,
): Promise<ModelReplay> {
  const refOf = (r: { escalated?: true }): ModelRef => (r.escalated && escalation ? escalation : model);
  const asked = requests.flatMap((r) => {
    const ref = refOf(r);
    return ref.provider === "actor" ? [{ ...r, ref }] : [];
  });
  if (model.provider !== "actor" && asked.length === 0)
    return { checked: 0, skipped: `the model is '${model.provider}', not a deterministic actor` };
  const recorded = new Map<string, unknown>();
  for (const r of records) if (r.type === "MODEL") recorded.set(r.event.requestId, r.event.response);
  let checked = 0;
  for (const { requestId, request, ref } of asked) {
    const before = recorded.get(requestId);
    // A request the log has no answer for was still in flight when the log ends (or it failed).
    if (before === undefined) continue;
    const again = await actorModelDriver(ref, bus).complete(request);
    if (canonicalJson(again) !== canonicalJson(before)) {
      throw new AgentError(
        "NONDETERMINISM",
        `model '${ref.name}' answered request ${requestId} differently from the record`,
        { details: { requestId, recorded: before, replayed: again } },
      );
    }
    checked += 1;
  }
  return { checked };
}
