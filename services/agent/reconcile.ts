import type { KV } from "@nats-io/kv";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import { decode } from "../../shared/bus/codec.js";
import { IdempotencyRecord, idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import { withBusRetry } from "../../shared/bus/retry.js";
import type { AwaitingEffect } from "../../shared/loop/state.js";
import { toRfc3339, type Clock } from "../../shared/runtime/clock.js";
import type { Logger } from "../../shared/runtime/logger.js";
import type { Random } from "../../shared/runtime/random.js";
import { OUTCOME_UNKNOWN } from "../../shared/tools/invoke.js";
import { outputExtras, type AnyTool } from "../../shared/tools/tool.js";

type ToolCall = Extract<AwaitingEffect, { type: "callTool" }>;

export interface ReconcilerDeps {
  idempotency: KV;
  clock: Clock;
  /** Jitters the retries of a read an outage failed. */
  random: Random;
  logger: Logger;
  tool: (name: string) => AnyTool | undefined;
  /** How often to look again while a call may still be running. */
  pollMs?: number;
  /** Extra time past the tool's own timeout before its outcome counts as unknown. */
  graceMs?: number;
}

/**
 * Decides what happened to a call of a non-idempotent tool when the worker cannot know: after
 * taking over a crashed worker's run, or after the call timed out. The tool service's record for
 * the idempotency key is the truth: a recorded result is used as the outcome; no record means the
 * service never started the call; a claim still running is waited on up to the tool's timeout,
 * after which the outcome is unknown and the run HALTs for a human. Never a blind retry.
 */
export class Reconciler {
  constructor(private readonly deps: ReconcilerDeps) {}

  /**
   * A tool call (`send`), reconciled when its outcome cannot be known otherwise: first after a
   * takeover (the previous worker may have sent it), and again if it ends without a known outcome.
   */
  async call(
    effect: ToolCall,
    takeover: boolean,
    send: () => Promise<LoopEvent | undefined>,
    signal: AbortSignal,
  ): Promise<LoopEvent | "release" | undefined> {
    if (takeover) {
      const known = await this.outcome(effect, signal);
      if (known) return known;
    }
    const event = await send();
    if (!event || !this.unknown(effect, event)) return event;
    return (await this.outcome(effect, signal)) ?? event;
  }

  /** Whether this call's outcome needs reconciling: a non-idempotent tool that ended without a known outcome. */
  unknown(effect: ToolCall, event: LoopEvent): boolean {
    const tool = this.deps.tool(effect.tool);
    return Boolean(
      tool && !tool.idempotent && event.type === "toolAborted" && OUTCOME_UNKNOWN.has(event.error.code),
    );
  }

  /**
   * The call's outcome from the service's record (or a HALT when it stays unknown); undefined when
   * the service never claimed the key, or the tool is idempotent (re-sending it is safe).
   */
  async outcome(effect: ToolCall, signal: AbortSignal): Promise<LoopEvent | "release" | undefined> {
    const tool = this.deps.tool(effect.tool);
    if (!tool || tool.idempotent) return undefined;
    const key = idempotencyBucketKey(effect.tool, effect.idempotencyKey);
    let told = false;
    for (;;) {
      // Read every 250 ms while the call runs: a restart or a leader election meanwhile is ridden
      // out, not a failed lease.
      const entry = await withBusRetry(`reading ${key}`, this.deps, () => this.deps.idempotency.get(key));
      if (!entry || entry.operation !== "PUT") return undefined;
      const record = decode(IdempotencyRecord, entry.value);
      const now = this.deps.clock.now();
      if (record.status === "done") {
        const reply = record.reply;
        return reply.ok
          ? {
              type: "toolCompleted",
              at: now,
              actionId: effect.actionId,
              output: reply.output,
              ...outputExtras(reply),
            }
          : { type: "toolAborted", at: now, actionId: effect.actionId, error: reply.error };
      }
      const haltAt = record.since + tool.timeoutMs + (this.deps.graceMs ?? 5_000);
      if (now > haltAt) return this.halt(effect, now);
      if (!told) {
        // Up to the tool's timeout without a step or a status change: the log says why.
        told = true;
        this.deps.logger.info(
          {
            tool: effect.tool,
            actionId: effect.actionId,
            since: toRfc3339(record.since),
            haltAt: toRfc3339(haltAt),
          },
          "a call's outcome is not known yet: its tool service's record says it runs; waiting for it",
        );
      }
      if (signal.aborted) return "release";
      await this.deps.clock.sleep(this.deps.pollMs ?? 250, signal).catch(() => undefined);
    }
  }

  private halt(effect: ToolCall, now: number): LoopEvent {
    this.deps.logger.error(
      { tool: effect.tool, actionId: effect.actionId },
      "outcome of a non-idempotent tool call is unknown: halting for reconciliation",
    );
    return {
      type: "halt",
      at: now,
      reason: `RECONCILIATION_REQUIRED: the outcome of non-idempotent tool '${effect.tool}' (action ${effect.actionId}, key ${effect.idempotencyKey}) is unknown; check whether its effect happened, then resume the run with --settle ran --output <its result as JSON>, or --settle not-run`,
      by: "runtime",
    };
  }
}
