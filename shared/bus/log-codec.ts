import { deflateSync, inflateSync } from "node:zlib";
import { z } from "zod";
import type { AuditEvent } from "../contracts/audit.js";
import { LogEntry, LogEvents, RunProgress } from "../contracts/log.js";
import {
  CompactEntry,
  compactEntry,
  expandEntry,
  expandEvents,
  expandProgress,
} from "../contracts/log-format.js";
import { AgentError } from "../runtime/errors.js";
import { validate } from "./codec.js";

/**
 * A body whose JSON reaches this many bytes is stored zlib-compressed: a checkpoint, a run's start
 * (its spec), a final artifact. A step's body stays plain JSON: deflating it in the worker and
 * inflating it in every reader would cost each step more time than the bytes are worth.
 */
export const COMPRESS_FROM = 2048;

/**
 * The most a compressed body may inflate to: far above any entry the runtime writes (a 10,000-step
 * run's whole transcript checkpoints at about 3 MB), far below what a crafted body of a few hundred
 * KB could make a reader allocate.
 */
export const MAX_INFLATED_BYTES = 64 * 1024 * 1024;

/** A plain body's first byte, `{`: any other is a zlib stream's (whose first byte depends on its window). */
const PLAIN = 0x7b;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * The body of a run log message holding `entry`, for the run `runId`: format 2 (see
 * log-format.ts), zlib-compressed from COMPRESS_FROM bytes. The runtime's own entries are not
 * validated here (see LogWriter.append).
 */
export function encodeLogEntry(runId: string, entry: LogEntry): Uint8Array {
  const json = encoder.encode(JSON.stringify(compactEntry(runId, entry)));
  return json.length < COMPRESS_FROM ? json : deflateSync(json, { level: 1 });
}

/**
 * A run log message's entry, from its body (a split message's parts put together): format 2,
 * compressed or not, or format 1 as earlier builds wrote it; validated, records and events whole.
 * Every reader of the log decodes through here or through decodeLogEvents.
 */
export function decodeLogEntry(data: Uint8Array): LogEntry {
  const raw = parseBody(data);
  return validate(LogEntry, isCompact(raw) ? expanded(raw, expandEntry) : raw);
}

/**
 * A run log message's events alone (see decodeLogEntry), its records left unread: a reader of
 * events does not depend on the record types of the build that wrote them.
 */
export function decodeLogEvents(data: Uint8Array): AuditEvent[] {
  const raw = parseBody(data);
  const body = isCompact(raw) ? { events: expanded(raw, expandEvents) } : raw;
  return validate(LogEvents, body).events;
}

/**
 * A run log message's progress alone (see decodeLogEntry): a reader of a run's progress does not
 * depend on the event kinds and record types of the build that wrote it.
 */
export function decodeLogProgress(data: Uint8Array): RunProgress | undefined {
  const raw = parseBody(data);
  const body = isCompact(raw) ? { progress: expanded(raw, (c) => expandProgress(c)) } : raw;
  return validate(LogProgress, body).progress;
}

const LogProgress = z.object({ progress: RunProgress.optional() });

/** A format 2 body expanded: a body no writer of ours makes, however it fails, is INVALID_INPUT. */
function expanded<T>(raw: unknown, expand: (c: CompactEntry) => T): T {
  const compact = validate(CompactEntry, raw);
  try {
    return expand(compact);
  } catch (cause) {
    throw new AgentError("INVALID_INPUT", "a run log message's body could not be expanded", { cause });
  }
}

function isCompact(raw: unknown): boolean {
  return typeof raw === "object" && raw !== null && "v" in raw;
}

/**
 * A body as JSON, decompressed, in whichever format it was written, unvalidated: for a tool that
 * peeks at a field both formats share (the bench reads each record's `type`), never for the runtime.
 */
export function parseBody(data: Uint8Array): unknown {
  try {
    const bytes = data[0] === PLAIN ? data : inflateSync(data, { maxOutputLength: MAX_INFLATED_BYTES });
    return JSON.parse(decoder.decode(bytes)) as unknown;
  } catch (cause) {
    throw new AgentError("INVALID_INPUT", "a run log message is neither JSON nor zlib-compressed JSON", {
      cause,
    });
  }
}
