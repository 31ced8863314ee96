import { deflateSync } from "node:zlib";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  COMPRESS_FROM,
  decodeLogEntry,
  decodeLogEvents,
  decodeLogProgress,
  encodeLogEntry,
  MAX_INFLATED_BYTES,
  parseBody,
} from "../../shared/bus/log-codec.js";
import { AUDIT_KINDS, type AuditEvent } from "../../shared/contracts/audit.js";
import type { LogEntry } from "../../shared/contracts/log.js";
import { LOG_FORMAT } from "../../shared/contracts/log-format.js";
import { echoCall, runner, spec } from "../helpers/fixtures.js";

const encoder = new TextEncoder();

/** A run's log cut into one entry per iteration, its records and events together, as a journal writes it. */
async function runEntries(runId: string): Promise<LogEntry[]> {
  const result = await runner({ checkpointEvery: 2 }).run(
    spec({ script: [echoCall("a"), echoCall("b"), echoCall("c"), { text: "done" }] }),
    { runId },
  );
  const iterations = [...new Set(result.wal.map((r) => r.iteration))];
  return iterations.map((iteration) => {
    const records = result.wal.filter((r) => r.iteration === iteration);
    const events = result.audit.filter((e) => e.iteration === iteration);
    const at = records.at(-1)?.at ?? 0;
    return { records, events, progress: { phase: "ACT", iteration, usage: result.state.usage, at } };
  });
}

function event(runId: string, seq: number, overrides: Partial<AuditEvent> = {}): AuditEvent {
  return {
    schemaVersion: 1,
    auditId: `${runId}:${seq}`,
    runId,
    rootRunId: runId,
    seq,
    iteration: 3,
    phase: "ACT",
    kind: "model.called",
    actor: "agent",
    status: "started",
    artifacts: [],
    timestamp: "2026-12-06T10:00:00.000Z",
    ...overrides,
  };
}

describe("the run log's message body (format 2)", () => {
  it("gives back every record and event of a run whole, in less than half the bytes of format 1", async () => {
    const entries = await runEntries("codec-run");
    expect(entries.some((e) => e.records.some((r) => r.type === "CHECKPOINT"))).toBe(true);
    let compact = 0;
    let whole = 0;
    for (const entry of entries) {
      const body = encodeLogEntry("codec-run", entry);
      expect(decodeLogEntry(body)).toEqual(entry);
      expect(decodeLogEvents(body)).toEqual(entry.events);
      expect(decodeLogProgress(body)).toEqual(entry.progress);
      compact += body.length;
      whole += encoder.encode(JSON.stringify(entry)).length;
    }
    expect(compact).toBeLessThan(whole / 2);
  });

  it("an event that repeats a record of its message refers to it, and a wrong reference is refused", async () => {
    const entry = (await runEntries("refers")).find((e) => e.records.some((r) => r.type === "MODEL"))!;
    const body = parseBody(encodeLogEntry("refers", entry)) as {
      records: object[];
      events: Record<string, unknown>[];
    };
    const responded = body.events.find((e) => e.kind === "model.responded");
    expect(typeof responded?.dataOf).toBe("number");
    expect(responded).not.toHaveProperty("data");
    expect(decodeLogEntry(encodeLogEntry("refers", entry))).toEqual(entry);
    // Pointing at a record of another type (or none) is not read as an event without data.
    for (const dataOf of [body.records.length, body.records.findIndex((r) => "from" in r || "to" in r)]) {
      const wrong = { ...body, events: [{ ...responded, dataOf }] };
      expect(() => decodeLogEvents(encoder.encode(JSON.stringify(wrong)))).toThrow(
        expect.objectContaining({ code: "INVALID_INPUT" }),
      );
    }
    // A record is named once: a body naming it again (to expand to many copies) is refused.
    const twice = { ...body, events: [...body.events, { ...responded, seq: 99 }] };
    expect(() => decodeLogEvents(encoder.encode(JSON.stringify(twice)))).toThrow(
      expect.objectContaining({ code: "INVALID_INPUT" }),
    );
    // Two events repeating the same record: the writer names it for the first only.
    const first = entry.events.find((e) => e.kind === "model.responded")!;
    const again = { ...entry, events: [...entry.events, { ...first, seq: entry.events.at(-1)!.seq + 1 }] };
    expect(decodeLogEntry(encodeLogEntry("refers", again))).toEqual(again);
  });

  it("still reads a body an earlier build wrote in format 1", async () => {
    const [entry] = await runEntries("old-format");
    const old = encoder.encode(JSON.stringify(entry));
    expect(decodeLogEntry(old)).toEqual(entry);
    expect(decodeLogEvents(old)).toEqual(entry?.events);
    expect(decodeLogProgress(old)).toEqual(entry?.progress);
  });

  it("states what items share once, and leaves a small body readable JSON", () => {
    const entry: LogEntry = { records: [], events: [event("small", 4), event("small", 5)] };
    const body = encodeLogEntry("small", entry);
    expect(body.length).toBeLessThan(COMPRESS_FROM);
    expect(parseBody(body)).toEqual({
      v: LOG_FORMAT,
      run: "small",
      at: Date.parse("2026-12-06T10:00:00.000Z"),
      seq: 4,
      events: [{ kind: "model.called", iteration: 3, phase: "ACT" }, { kind: "model.called" }],
    });
  });

  it("compresses a large body, and reads it back", () => {
    const big = { text: "x".repeat(COMPRESS_FROM * 4) };
    const entry: LogEntry = { records: [], events: [event("big", 1, { data: big })] };
    const body = encodeLogEntry("big", entry);
    expect(body[0]).not.toBe("{".charCodeAt(0));
    expect(body.length).toBeLessThan(COMPRESS_FROM);
    expect(decodeLogEntry(body)).toEqual(entry);
  });

  it("keeps whatever differs from the defaults: other runs, parents, gaps, statuses, offsets", () => {
    const runId = "odd";
    const entry: LogEntry = {
      records: [],
      events: [
        event(runId, 7, { rootRunId: "root", parentRunId: "parent", actor: "tool:echo", status: "failed" }),
        event(runId, 9, { auditId: "custom", rootRunId: "root", reason: "why", artifacts: ["h"] }),
        event("other", 10, { rootRunId: "root", timestamp: "2026-12-06T12:00:00+02:00" }),
        event(runId, 11, { phase: "VERIFY", iteration: 0, timestamp: "2026-12-06T09:59:59.250Z" }),
      ],
    };
    expect(decodeLogEntry(encodeLogEntry(runId, entry))).toEqual(entry);
  });

  it("round-trips any events", () => {
    const kinds = fc.constantFrom(...AUDIT_KINDS);
    const events = fc.array(
      fc.record({
        kind: kinds,
        seq: fc.integer({ min: 1, max: 50 }),
        iteration: fc.integer({ min: 0, max: 3 }),
        phase: fc.constantFrom("ACT" as const, "VERIFY" as const),
        status: fc.constantFrom("started" as const, "passed" as const, "failed" as const),
        actor: fc.constantFrom("agent", "supervisor", "tool:echo"),
        parent: fc.option(fc.constantFrom("p1", "p2"), { nil: undefined }),
        ms: fc.integer({ min: 0, max: 2_000_000_000_000 }),
        data: fc.option(fc.dictionary(fc.string(), fc.jsonValue()), { nil: undefined }),
      }),
      { maxLength: 6 },
    );
    fc.assert(
      fc.property(events, (items) => {
        const entry: LogEntry = {
          records: [],
          events: items.map((i) =>
            event("r", i.seq, {
              kind: i.kind,
              iteration: i.iteration,
              phase: i.phase,
              status: i.status,
              actor: i.actor,
              ...(i.parent === undefined ? {} : { parentRunId: i.parent }),
              ...(i.data === undefined ? {} : { data: i.data }),
              timestamp: new Date(i.ms).toISOString(),
            }),
          ),
        };
        // Through JSON first: what a body can hold (no -0, no undefined inside data).
        const expected = JSON.parse(JSON.stringify(entry)) as LogEntry;
        expect(decodeLogEntry(encodeLogEntry("r", expected))).toEqual(expected);
      }),
    );
  });

  it("refuses a body it cannot read with INVALID_INPUT", () => {
    const bad = [
      encoder.encode("not json"),
      encoder.encode(JSON.stringify({ v: 3, run: "r", at: 0 })),
      encoder.encode(JSON.stringify({ v: 2, run: "r", at: 0, events: [{ kind: "no.such" }] })),
      new Uint8Array([0x78, 1, 2, 3]),
      // Times no Date can hold: the body's, or an event's offset from it.
      encoder.encode(JSON.stringify({ v: 2, run: "r", at: 1e300, events: [{ kind: "run.admitted" }] })),
      encoder.encode(JSON.stringify({ v: 2, run: "r", at: 0, events: [{ kind: "run.admitted", t: 1e300 }] })),
    ];
    for (const body of bad)
      expect(() => decodeLogEntry(body)).toThrow(expect.objectContaining({ code: "INVALID_INPUT" }));
    // A compressed body that would inflate past what any entry of ours holds stops at the cap.
    const bomb = deflateSync(Buffer.alloc(MAX_INFLATED_BYTES + 1024, 0x20), { level: 1 });
    expect(() => decodeLogEntry(bomb)).toThrow(
      expect.objectContaining({
        code: "INVALID_INPUT",
        cause: expect.objectContaining({ code: "ERR_BUFFER_TOO_LARGE" }) as unknown,
      }),
    );
  });
});
