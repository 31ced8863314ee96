import { AgentError } from "../runtime/errors.js";

/**
 * A WAL record larger than one NATS message (the server's `max_payload`, 1 MiB by default) is
 * stored as consecutive messages on the run's subject, each carrying a slice of the record's bytes
 * and this header, `<part>/<parts>` (1-based). A checkpoint of a run whose transcript has grown
 * (ten 64 KiB tool results are enough) is such a record: refusing it would stall the run forever.
 */
export const PART_HEADER = "Agents-Wal-Part";

/** Room left in each message for its headers (message id, expected sequence, part). */
export const HEADER_ROOM = 4 * 1024;

/** Slices of at most `max` bytes each (one slice when the record fits). */
export function splitRecord(data: Uint8Array, max: number): Uint8Array[] {
  if (max <= 0) throw new AgentError("INTERNAL", `a WAL part must hold at least one byte (got ${max})`);
  if (data.length <= max) return [data];
  const parts: Uint8Array[] = [];
  for (let at = 0; at < data.length; at += max) parts.push(data.subarray(at, at + max));
  return parts;
}

export function partHeader(part: number, parts: number): string {
  return `${part}/${parts}`;
}

/** What a client may put in one message when the server has not said (nats-server's default). */
export const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/**
 * The messages one encoded record is stored as on a server with this `max_payload`: the record
 * itself when it fits, else its parts, each with the value of its part header.
 */
export function recordMessages(
  data: Uint8Array,
  maxPayload = DEFAULT_MAX_PAYLOAD,
): { data: Uint8Array; part?: string }[] {
  const parts = splitRecord(data, maxPayload - HEADER_ROOM);
  if (parts.length === 1) return [{ data }];
  return parts.map((part, i) => ({ data: part, part: partHeader(i + 1, parts.length) }));
}

interface Part {
  part: number;
  parts: number;
}

function parsePart(value: string): Part | undefined {
  const match = /^(\d+)\/(\d+)$/.exec(value);
  if (!match) return undefined;
  const part = Number(match[1]);
  const parts = Number(match[2]);
  return part >= 1 && part <= parts ? { part, parts } : undefined;
}

/**
 * Puts split records back together while a WAL is read in order. A writer that died in the middle
 * of a split record left a prefix of its parts; the record was never written (its successor
 * writes it again, from part 1), so an incomplete prefix is dropped, never decoded.
 */
export class PartAssembler {
  private chunks: Uint8Array[] = [];
  private expected: Part | undefined;
  private firstSeq = 0;

  /**
   * One message of the WAL, in order. Returns a whole record's bytes and the sequence of its
   * first message (where a read must start to get it back), or nothing while parts are missing.
   */
  push(
    seq: number,
    data: Uint8Array,
    header: string | undefined,
  ): { seq: number; data: Uint8Array } | undefined {
    const part = header === undefined || header === "" ? undefined : parsePart(header);
    if (header && !part)
      throw new AgentError("INVALID_INPUT", `WAL message ${seq} has a bad part header '${header}'`);
    if (!part) {
      this.reset();
      return { seq, data };
    }
    if (part.part === 1) {
      this.reset();
      this.firstSeq = seq;
    } else if (!this.expected || part.parts !== this.expected.parts || part.part !== this.expected.part + 1) {
      // A part out of order: the rest of an abandoned record. Nothing to assemble until a part 1.
      this.reset();
      return undefined;
    }
    this.chunks.push(data);
    this.expected = part;
    if (part.part < part.parts) return undefined;
    const whole = concat(this.chunks);
    const first = this.firstSeq;
    this.reset();
    return { seq: first, data: whole };
  }

  private reset(): void {
    this.chunks = [];
    this.expected = undefined;
  }
}

function concat(chunks: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}
