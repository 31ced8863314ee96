import type { Message } from "../contracts/model.js";
import { canonicalJson } from "../runtime/canonical-json.js";
import { sha256 } from "../runtime/hash.js";
import { bucketCallCounts } from "./guard.js";
import type { Effect, LoopState, TranscriptDigest } from "./state.js";

/**
 * A running hash of the transcript. Messages are only ever appended, so folding in the new ones
 * keeps the digest current at the cost of the new messages alone: the transition hash of a step
 * must not cost more after 3,000 steps than after 3 (hashing the whole transcript made it
 * 18 ms/step at step 3,000).
 */
export function digestTranscript(
  previous: TranscriptDigest | undefined,
  messages: readonly Message[],
): TranscriptDigest {
  // A checkpoint written before digests existed, or a shorter transcript: fold from the start.
  const usable = previous && previous.count <= messages.length && previous.bytes !== undefined;
  let { count, hash, bytes } = usable ? previous : { count: 0, hash: sha256("transcript"), bytes: 0 };
  for (; count < messages.length; count += 1) {
    const json = canonicalJson(messages[count]);
    hash = sha256(`${hash}\n${sha256(json)}`);
    bytes += json.length;
  }
  return { count, hash, bytes };
}

/**
 * A checkpoint is written every N steps only while it is cheap next to what it saves: once the
 * transcript is large, the next one waits until the transcript has grown by an eighth. Rewriting
 * a state that grows with the run every N steps would store O(steps²) bytes; this way all the
 * checkpoints of a run add up to about nine times its final state, and a resume still replays a
 * tail no larger than an eighth of the checkpoint it starts from.
 */
export const CHECKPOINT_GROWTH = 8;

export function checkpointWorthwhile(state: LoopState): boolean {
  const at = state.checkpointBytes ?? 0;
  const now = state.transcript?.bytes ?? 0;
  return (now - at) * CHECKPOINT_GROWTH >= at;
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
