import type { Message } from "../contracts/model.js";
import { canonicalJson } from "../runtime/canonical-json.js";
import { AgentError } from "../runtime/errors.js";
import { xxh64 } from "../runtime/hash.js";
import { carriedCounts, storedCounts } from "./call-counts.js";
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
  let { count, hash, bytes } = usable ? previous : { count: 0, hash: xxh64("transcript"), bytes: 0 };
  for (; count < total; count += 1) {
    const json = canonicalJson(messages[count === 0 ? 0 : count - elided]);
    hash = xxh64(`${hash}\n${xxh64(json)}`);
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
 * A checkpoint is considered every N model responses and written once the transitions since the
 * last one have sealed (serialised and hashed) at least CHECKPOINT_RATIO times as many bytes as it
 * held. Writing one costs about what sealing that much does, so checkpoints cost a run at most
 * half its own work, and a resume re-runs at most about twice what it reads, plus N responses. A
 * state that grows with the run is so checkpointed ever less often (the bytes sealed per step stay
 * the same), and all its checkpoints add up to a few times its last.
 */
export const CHECKPOINT_RATIO = 2;

/**
 * The ratio once the context window is full and the state has stopped growing. Ten steps seal
 * about as much as such a state holds, so with the default N its checkpoints come every N
 * responses, as a short run's do: a resume replays as few steps after 10,000 steps as after 10,
 * and each checkpoint costs about what the steps since the last did.
 */
export const BOUNDED_CHECKPOINT_RATIO = 0.5;

export function checkpointWorthwhile(state: LoopState): boolean {
  const ratio = (state.elided ?? 0) > 0 ? BOUNDED_CHECKPOINT_RATIO : CHECKPOINT_RATIO;
  return (state.sealedSinceCheckpoint ?? 0) >= ratio * (state.checkpointSize ?? 0);
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
  // Its own size is in its record, not in the state it holds (see restoreCheckpoint).
  const { guard, checkpointSize: _size, ...rest } = state;
  const withCounts = {
    ...rest,
    guard: { ...guard, callCounts: storedCounts(guard.callCounts, guard.recentCalls) },
  };
  const a = state.awaiting;
  if (a?.type !== "callModel" || a.request.messages !== state.messages) return withCounts;
  const { messages: _transcript, ...request } = a.request;
  return { ...withCounts, awaiting: { ...a, request: { ...request, transcript: true } as never } };
}

/**
 * The state a checkpoint holds, as the loop uses it: of its call counts (however an older version
 * stored them) only what the window's calls do not account for, and the checkpoint's size from its
 * record (`bytes`; absent from an older version's, which makes the next checkpoint due).
 */
export function restoreCheckpoint(stored: LoopState, bytes = 0): LoopState {
  const { guard, checkpointBytes: _transcriptAt, checkpointRetained: _held, ...state } = stored;
  const callCounts = carriedCounts(guard.callCounts, guard.recentCalls);
  const snapshot = { ...state, checkpointSize: bytes, guard: { ...guard, callCounts } };
  const a = snapshot.awaiting;
  if (a?.type !== "callModel" || !(a.request as { transcript?: boolean }).transcript) return snapshot;
  const { transcript: _marker, ...request } = a.request as typeof a.request & { transcript?: boolean };
  return { ...snapshot, awaiting: { ...a, request: { ...request, messages: snapshot.messages } } };
}
