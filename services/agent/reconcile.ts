import type { KV } from "@nats-io/kv";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import { decode } from "../../shared/bus/codec.js";
import { IdempotencyRecord, idempotencyBucketKey } from "../../shared/bus/tool-service.js";
import type { AwaitingEffect } from "../../shared/loop/state.js";
import type { Clock } from "../../shared/runtime/clock.js";
import type { Logger } from "../../shared/runtime/logger.js";
import type { AnyTool } from "../../shared/tools/tool.js";

type ToolCall = Extract<AwaitingEffect, { type: "callTool" }>;

export interface ReconcilerDeps {
  idempotency: KV;
  clock: Clock;
  logger: Logger;
  tool: (name: string) => AnyTool | undefined;
  /** How often to look again while the previous worker's call may still be running. */
  pollMs?: number;
  /** Extra time past the tool's own timeout before its outcome counts as unknown. */
  graceMs?: number;
}

/**
 * Decides what a worker that took over a run may do with the tool call the run was waiting on.
 * Re-sending the call with the same idempotency key is always safe when the tool service has not
 * claimed the key (it never started) or has recorded a result (it answers with it). For a
 * non-idempotent tool whose claim is still "running", the worker waits for the outcome up to the
 * tool's timeout; after that the outcome is unknown and the run HALTs for a human, never retried
 * blindly.
 */
export class Reconciler {
  constructor(private readonly deps: ReconcilerDeps) {}

  async check(effect: ToolCall, signal: AbortSignal): Promise<LoopEvent | "release" | undefined> {
    const tool = this.deps.tool(effect.tool);
    if (!tool || tool.idempotent) return undefined;
    const key = idempotencyBucketKey(effect.tool, effect.idempotencyKey);
    for (;;) {
      const entry = await this.deps.idempotency.get(key);
      if (!entry || entry.operation !== "PUT") return undefined;
      const record = decode(IdempotencyRecord, entry.value);
      if (record.status === "done") return undefined;
      const now = this.deps.clock.now();
      if (now > record.since + tool.timeoutMs + (this.deps.graceMs ?? 5_000)) {
        this.deps.logger.error(
          { tool: effect.tool, actionId: effect.actionId },
          "outcome of a non-idempotent tool call is unknown: halting for reconciliation",
        );
        return {
          type: "halt",
          at: now,
          reason: `RECONCILIATION_REQUIRED: the outcome of non-idempotent tool '${effect.tool}' (action ${effect.actionId}) is unknown after a worker crash; check its effect, then resume the run`,
          by: "runtime",
        };
      }
      if (signal.aborted) return "release";
      await this.deps.clock.sleep(this.deps.pollMs ?? 250, signal).catch(() => undefined);
    }
  }
}
