import type { ActorBus } from "../../shared/bus/actor.js";
import { removeMessage, type Removal } from "../../shared/bus/remove-message.js";
import { withBusRetry } from "../../shared/bus/retry.js";
import { idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import { scanWal } from "../../shared/bus/run-log.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { bucketStream } from "../../shared/bus/subjects.js";

/** Idempotency records removed at once: a W1 loop's 19 in two round trips' time, not nineteen. */
const REMOVALS_IN_FLIGHT = 16;

/**
 * Removes the idempotency records of finished runs' tool calls, one per INTENT in the run's log. A
 * committed or failed run never calls a tool again, so nothing reads them any more, and they would
 * otherwise stay for ever. Each key's one message (history 1) is read for its sequence and removed
 * by it, leaving no delete marker behind, and only keys the run's own calls name: another run's
 * records are never touched. By sequence, not by a purge of the key's subject: the supervisor's
 * NATS user may remove single messages from the bucket but not purge it (permissions.conf). A
 * NATS user that may not remove them leaves them, said once: the status retention goes on without.
 */
export class ToolRecords {
  private deniedSaid = false;

  constructor(private readonly bus: ActorBus) {}

  /** Removes the run's records; returns how many it removed. */
  async removeFor(runId: string): Promise<number> {
    const keys = [...(await this.keysOf(runId))];
    let removed = 0;
    let denied = false;
    for (let i = 0; i < keys.length; i += REMOVALS_IN_FLIGHT) {
      const outcomes = await Promise.all(
        keys.slice(i, i + REMOVALS_IN_FLIGHT).map((key) => this.remove(key)),
      );
      removed += outcomes.filter((o) => o === "removed").length;
      denied ||= outcomes.includes("denied");
    }
    if (denied && !this.deniedSaid) {
      this.deniedSaid = true;
      this.bus.logger.warn(
        { runId, stream: this.stream },
        "this NATS user may not remove messages from the idempotency bucket: finished runs' tool call records are kept (allow the supervisor $JS.API.STREAM.MSG.DELETE on it, see permissions.conf)",
      );
    }
    return removed;
  }

  private get stream(): string {
    return bucketStream(this.bus.subjects.buckets().idempotency);
  }

  /** The bucket keys of the calls the run's log names; as far as it reads, if it cannot be read whole. */
  private async keysOf(runId: string): Promise<Set<string>> {
    const keys = new Set<string>();
    try {
      for await (const record of scanWal(this.bus, runId)) {
        if (record.type === "INTENT") keys.add(idempotencyBucketKey(record.tool, record.idempotencyKey));
      }
    } catch (err) {
      if (!(err instanceof AgentError) || err.code !== "INVALID_INPUT") throw err;
      this.bus.logger.warn(
        { err, runId },
        "a finished run's log is unreadable: its later tool calls' idempotency records are left",
      );
    }
    return keys;
  }

  private async remove(key: string): Promise<Removal | "absent"> {
    const { bus, stream } = this;
    const entry = await withBusRetry(`reading the idempotency record ${key}`, bus, () =>
      bus.buckets.idempotency.get(key),
    );
    if (!entry) return "absent";
    return removeMessage(bus, stream, entry.revision, `the idempotency record ${key}`);
  }
}
