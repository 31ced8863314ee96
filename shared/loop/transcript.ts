import type { Message } from "../contracts/model.js";
import { canonicalJson } from "../runtime/canonical-json.js";
import { AgentError } from "../runtime/errors.js";
import { sha256 } from "../runtime/hash.js";
import { bucketCallCounts } from "./guard.js";
import type { Effect, LoopState, TranscriptDigest } from "./state.js";

/**
 * A running hash of the transcript. Messages are only ever appended, so folding in the new ones
 * keeps the digest current at the cost of the new messages alone: the transition hash of a step
 * must not cost more after 3,000 steps than after 3 (hashing the whole transcript made it
 * 18 ms/step at step 3,000). `elided` messages (after the first) have left `messages` for the
 * context window; they were folded in before they left.
 */
export function digestTranscript(
  previous: TranscriptDigest | undefined,
  messages: readonly Message[],
  elided = 0,
): TranscriptDigest {
  const total = elided + messages.length;
  // A checkpoint written before digests existed, or a shorter transcript: fold from the start.
  const usable =
    previous && previous.count <= total && previous.count > elided && previous.bytes !== undefined;
  if (!usable && elided > 0) {
    throw new AgentError("INTERNAL", "transcript digest lost: messages left the context window unhashed");
  }
  let { count, hash, bytes } = usable ? previous : { count: 0, hash: sha256("transcript"), bytes: 0 };
  for (; count < total; count += 1) {
    const json = canonicalJson(messages[count === 0 ? 0 : count - elided]);
    hash = sha256(`${hash}\n${sha256(json)}`);
    bytes += json.length;
  }
  return { count, hash, bytes };
}

/**
 * The context window, applied before a model call: the task (the first message) and the most
 * recent messages, `maxContextMessages` in all. The cut moves back to the call a tool result
 * answers (model APIs refuse a result without its call), so the window may hold a few more. The
 * digest takes in every message before it leaves.
 */
export function windowTranscript(s: LoopState): void {
  const max = s.limits.maxContextMessages;
  if (max === undefined || s.messages.length <= max) return;
  const elided = s.elided ?? 0;
  s.transcript = digestTranscript(s.transcript, s.messages, elided);
  let cut = s.messages.length - (max - 1);
  while (cut > 1 && s.messages[cut]?.role === "tool") cut -= 1;
  if (cut <= 1) return;
  s.messages = [s.messages[0]!, ...s.messages.slice(cut)];
  s.elided = elided + cut - 1;
}

/**
 * A checkpoint is written every N steps only while it is cheap next to what it saves: once the
 * transcript it holds is large, the next one waits until the transcript has grown by an eighth
 * of that. Rewriting a state that grows with the run every N steps would store O(steps²) bytes;
 * this way all the checkpoints of a run add up to about nine times its final state, and a resume
 * still replays a tail no larger than an eighth of the checkpoint it starts from. Under a context
 * window the state stops growing, and a checkpoint is due every N steps again.
 */
export const CHECKPOINT_GROWTH = 8;

export function checkpointWorthwhile(state: LoopState): boolean {
  const at = state.checkpointBytes ?? 0;
  const held = state.checkpointRetained ?? at;
  const now = state.transcript?.bytes ?? 0;
  return (now - at) * CHECKPOINT_GROWTH >= held;
}

/**
 * The size of the transcript a checkpoint of this state holds, once the context window has left
 * messages out: measured when a checkpoint is written (it serialises the state anyway), not
 * tracked message by message.
 */
export function retainedBytes(state: LoopState): number {
  return canonicalJson(state.messages).length;
}

/** The effects as the transition hash sees them: a model call on the run's transcript carries its digest. */
export function hashableEffects(effects: readonly Effect[], state: LoopState): unknown[] {
  return effects.map((e) =>
    e.type === "callModel" && e.request.messages === state.messages && state.transcript
      ? { ...e, request: { ...e.request, messages: state.transcript } }
      : e,
  );
}

/**
 * The state a checkpoint stores. Most checkpoints wait on a tool; one taken while a model call is
 * pending (after a truncated response, say) would hold the transcript twice, in the state and in
 * the request, so the snapshot leaves the request's copy out (marked) and `restoreCheckpoint` puts
 * it back.
 */
export function checkpointOf(state: LoopState): LoopState {
  const a = state.awaiting;
  if (a?.type !== "callModel" || a.request.messages !== state.messages) return { ...state };
  const { messages: _transcript, ...request } = a.request;
  return { ...state, awaiting: { ...a, request: { ...request, transcript: true } as never } };
}

/** The state a checkpoint holds, as the loop uses it (call counts of older versions put into buckets). */
export function restoreCheckpoint(stored: LoopState): LoopState {
  const callCounts = bucketCallCounts(stored.guard.callCounts);
  const snapshot =
    callCounts === stored.guard.callCounts ? stored : { ...stored, guard: { ...stored.guard, callCounts } };
  const a = snapshot.awaiting;
  if (a?.type !== "callModel" || !(a.request as { transcript?: boolean }).transcript) return snapshot;
  const { transcript: _marker, ...request } = a.request as typeof a.request & { transcript?: boolean };
  return { ...snapshot, awaiting: { ...a, request: { ...request, messages: snapshot.messages } } };
}
