import type { AuditActor, AuditKind, AuditStatus, Phase } from "../contracts/audit.js";
import type { GuardVerdict } from "../contracts/guard.js";
import type { WalRecord } from "../contracts/wal.js";
import { toRfc3339 } from "../runtime/clock.js";
import { canonicalJson } from "../runtime/canonical-json.js";
import { sha256, xxh64 } from "../runtime/hash.js";
import type { AwaitingEffect, Effect, LoopState, Pending } from "./state.js";
import { checkpointOf, checkpointWorthwhile, digestTranscript, hashableEffects } from "./transcript.js";

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
export type WalBody = DistributiveOmit<WalRecord, "schemaVersion" | "runId" | "iteration" | "at">;

export interface AuditOptions {
  reason?: string;
  data?: Record<string, unknown>;
  artifacts?: string[];
  actor?: AuditActor;
}

/**
 * One transition in progress: a shallow copy of the state plus the effects it emits. Handlers
 * replace arrays rather than mutate them, so the state passed in is never changed.
 */
export class Draft {
  readonly effects: Effect[] = [];
  state: LoopState;

  constructor(
    previous: LoopState,
    readonly at: number,
  ) {
    this.state = { ...previous, updatedAt: at };
  }

  emit(effect: Effect): void {
    this.effects.push(effect);
  }

  /** Emits an effect whose answer the loop waits for, remembering it for resume. */
  await(effect: AwaitingEffect, pending: Pending): void {
    this.state.pending = pending;
    this.state.awaiting = effect;
    this.effects.push(effect);
  }

  settle(): void {
    this.state.pending = null;
    this.state.awaiting = null;
  }

  wal(body: WalBody): void {
    const s = this.state;
    const record = {
      schemaVersion: 1,
      runId: s.runId,
      iteration: s.guard.iteration,
      at: this.at,
      ...body,
    } as WalRecord;
    this.effects.push({ type: "wal", record });
  }

  audit(kind: AuditKind, status: AuditStatus, options: AuditOptions = {}): void {
    const s = this.state;
    const seq = s.auditSeq + 1;
    s.auditSeq = seq;
    this.effects.push({
      type: "audit",
      event: {
        schemaVersion: 1,
        auditId: `${s.runId}:${seq}`,
        runId: s.runId,
        rootRunId: s.rootRunId,
        ...(s.parentRunId ? { parentRunId: s.parentRunId } : {}),
        seq,
        iteration: s.guard.iteration,
        phase: s.phase,
        kind,
        actor: options.actor ?? "agent",
        status,
        ...(options.reason !== undefined ? { reason: options.reason } : {}),
        artifacts: options.artifacts ?? [],
        ...(options.data ? { data: options.data } : {}),
        timestamp: toRfc3339(this.at),
      },
    });
  }

  /** A phase change is logged before anything of the next phase happens. */
  enter(phase: Phase, reason?: string, data?: Record<string, unknown>): void {
    const from = this.state.phase === phase && this.state.transitions === 0 ? null : this.state.phase;
    this.state.phase = phase;
    this.wal({ type: "PHASE", from, to: phase, ...(reason ? { reason } : {}) });
    this.audit("phase.entered", "started", { ...(reason ? { reason } : {}), ...(data ? { data } : {}) });
  }

  /** Records a guard verdict: every non-allow verdict becomes an audit event, so warnings are never swallowed. */
  guard(verdict: GuardVerdict, data?: Record<string, unknown>): void {
    if (verdict.kind === "allow") return;
    const kind =
      verdict.kind === "warn"
        ? "guard.warn"
        : verdict.kind === "block"
          ? "guard.blocked"
          : "guard.circuit_break";
    this.audit(kind, verdict.kind === "warn" ? "passed" : "failed", {
      reason: verdict.message,
      data: { guardReason: verdict.reason, ...data },
    });
  }

  /**
   * Seals the transition: the hash chains the previous hash, the event and the effects. A
   * checkpoint, when due, is a snapshot of the sealed state, so it comes last and is not hashed.
   */
  finish(event: unknown, checkpoint = false): { state: LoopState; effects: Effect[] } {
    const s = this.state;
    s.transitions += 1;
    s.transcript = digestTranscript(s.transcript, s.messages, s.elided);
    const sealed = canonicalJson(hashableEffects(this.effects, s));
    // A transition logs its event first (MODEL, COMPLETE, EVENT…): hashed with the effects, once.
    const unlogged = logsEvent(this.effects, event) ? "" : `\n${canonicalJson(event)}`;
    // A chain that replay compares, not a content address: xxHash, a fraction of sha256's cost per step.
    s.transitionHash = xxh64(`${s.transitionHash}\n${sealed}${unlogged}`);
    s.sealedSinceCheckpoint = (s.sealedSinceCheckpoint ?? 0) + sealed.length;
    if (checkpoint && checkpointWorthwhile(s)) {
      // Content-addressed by runId‖iteration: rewriting the same checkpoint yields the same id.
      const checkpointId = sha256(`${s.runId}\u0000${s.guard.iteration}`);
      s.lastCheckpoint = checkpointId;
      s.sealedSinceCheckpoint = 0;
      const snapshot = checkpointOf(s);
      const json = canonicalJson(snapshot);
      s.checkpointSize = json.length;
      this.wal({
        type: "CHECKPOINT",
        checkpointId,
        stateHash: sha256(json),
        bytes: json.length,
        state: snapshot,
      });
    }
    return { state: s, effects: this.effects };
  }
}

/** Whether one of the effects is the record that logs this very event. */
function logsEvent(effects: readonly Effect[], event: unknown): boolean {
  return effects.some((e) => e.type === "wal" && "event" in e.record && e.record.event === event);
}
