import { JetStreamApiError } from "@nats-io/jetstream";
import { AgentError } from "../runtime/errors.js";

/**
 * JetStream's answers to a write that found no room: the server's store is at `max_file_store`
 * (10023, "insufficient resources"), a stream could not reserve its storage (10047), or the
 * account is at its JetStream limits (10002). Reads still work, and every write fails the same way
 * until room is made, so a write that gets one is not retried like an outage's.
 */
const NO_ROOM: ReadonlySet<number> = new Set([10023, 10047, 10002]);
/**
 * A stream's store failing a write (10077) because the disk under it is full: the server's
 * `max_file_store` was above the room the volume has. The server passes the system's words on.
 */
const STORE_FAILED = 10077;
const DISK_FULL = /no space left on device|disk quota exceeded/i;

/** Whether `err` is that refusal, or an error it caused (a tool's failure, say: a few causes deep). */
export function isStorageFull(err: unknown): boolean {
  return noRoom(err) !== undefined;
}

function noRoom(err: unknown, depth = 0): JetStreamApiError | undefined {
  if (err instanceof JetStreamApiError) return NO_ROOM.has(err.code) || diskFull(err) ? err : undefined;
  if (!(err instanceof Error) || depth >= 3) return undefined;
  return noRoom(err.cause, depth + 1);
}

/**
 * `what` refused for lack of room, as STORAGE_FULL; undefined for any other error. An AgentError
 * that says STORAGE_FULL already is returned as it is.
 */
export function storageFull(what: string, err: unknown): AgentError<"STORAGE_FULL"> | undefined {
  if (err instanceof AgentError && err.code === "STORAGE_FULL") return err as AgentError<"STORAGE_FULL">;
  const refusal = noRoom(err);
  if (!refusal) return undefined;
  const said = refusal.message;
  const fix = diskFull(refusal)
    ? "free or grow the disk under its store, and set its max_file_store below the room that disk has (JetStream refuses writes at that limit, and may stop answering when the disk fills first)"
    : "raise its max_file_store (or the account's JetStream limits) or free disk space";
  return new AgentError(
    "STORAGE_FULL",
    `${what}: the NATS server's JetStream storage is full (${said}), nothing was written; ${fix}: what waits goes on once there is room`,
    { cause: err },
  );
}

function diskFull(err: JetStreamApiError): boolean {
  return err.code === STORE_FAILED && DISK_FULL.test(err.message);
}
