import { randomBytes } from "node:crypto";
import { appendEach } from "../helpers/log.js";
import { describe, expect, it } from "vitest";
import { entryOfMessage, readLog, LogWriter, writerAfter, type LogDeps } from "../../shared/bus/run-log.js";
import { auditCount, lastAuditEvent, readAudit } from "../../shared/bus/audit.js";
import { AckPublisher } from "../../shared/bus/ack-publisher.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { replay } from "../../shared/loop/replay.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { describeTool } from "../../shared/tools/tool.js";
import { lifecycleEvent } from "../helpers/finished-runs.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { echoCall, runner, spec } from "../helpers/fixtures.js";

const deps: LogDeps = useBusSuite("w");

/** Text that compression leaves about as large: bodies from COMPRESS_FROM bytes are stored compressed. */
const noise = (length: number): string => randomBytes(length).toString("base64").slice(0, length);

const phase = (runId: string, n: number): WalRecord => ({
  schemaVersion: 1,
  runId,
  iteration: n,
  at: n,
  type: "PHASE",
  from: null,
  to: "ACT",
});

describe("the run log on JetStream", () => {
  it("a run's WAL written to JetStream and read back replays to the same state", async () => {
    const result = await runner({ checkpointEvery: 2 }).run(
      spec({ script: [echoCall("a"), echoCall("b"), echoCall("c"), { text: "done" }] }),
      {
        runId: "replayed-run",
      },
    );
    const writer = new LogWriter(deps, "replayed-run", "worker-a", 0, 0);
    await appendEach(writer, result.wal);
    const read = await readLog(deps, "replayed-run");
    expect(read.records.map((r) => r.record)).toEqual(result.wal);
    expect(read.records.map((r) => r.seq)).toEqual([...read.records.map((r) => r.seq)].sort((a, b) => a - b));
    const config = { tools: [describeTool(echoTool)], checkpointEvery: 2 };
    const replayed = replay(
      read.records.map((r) => r.record),
      config,
    );
    expect(replayed.transitions).toEqual(result.transitions);
    expect(replayed.state).toEqual(result.state);
    // The last message names the latest checkpoint before it: read from there, a resume has a
    // short tail to replay and reaches the same state.
    const checkpoint = read.records.filter((r) => r.record.type === "CHECKPOINT").at(-1);
    expect(checkpoint).toBeDefined();
    const tail = await readLog(deps, "replayed-run", "checkpoint");
    expect(tail.fromSeq).toBe(checkpoint?.seq);
    expect(tail.checkpointSeq).toBe(checkpoint?.seq);
    expect(tail.records.length).toBeLessThan(read.records.length);
    expect(
      replay(
        tail.records.map((r) => r.record),
        config,
        { fromCheckpoint: true },
      ).state,
    ).toEqual(result.state);
  });

  it("two writers at the same position: exactly one append lands, the other is FENCED", async () => {
    const a = new LogWriter(deps, "contended", "worker-a", 0, 0);
    await a.append([phase("contended", 1)]);
    const read = await readLog(deps, "contended");
    const w1 = writerAfter(deps, "contended", "worker-b", read);
    const w2 = writerAfter(deps, "contended", "worker-c", read);
    await w1.append([phase("contended", 2)]);
    await expect(w2.append([phase("contended", 3)])).rejects.toMatchObject({
      code: "FENCED",
      retryable: false,
    });
    const after = await readLog(deps, "contended");
    expect(after.records.map((r) => r.record.iteration)).toEqual([1, 2]);
  });

  it("a read names the writer of the WAL's last message, from the start and from a checkpoint's sequence", async () => {
    const a = new LogWriter(deps, "last-writer", "agent-1-1-ab12cd34.j17", 0, 0);
    const first = await a.append([phase("last-writer", 1)]);
    const b = writerAfter(deps, "last-writer", "agent-2-4-ef56ab78.j23", await readLog(deps, "last-writer"));
    await b.append([phase("last-writer", 2), phase("last-writer", 3)]);
    expect((await readLog(deps, "last-writer")).lastWriter).toBe("agent-2-4-ef56ab78.j23");
    expect((await readLog(deps, "last-writer", first + 1)).lastWriter).toBe("agent-2-4-ef56ab78.j23");
    expect((await readLog(deps, "no-such-run")).lastWriter).toBeUndefined();
  });

  it("re-sending an appended record (a retry after a lost ack) is deduplicated, not fenced", async () => {
    const w = new LogWriter(deps, "retried", "worker-a", 0, 0);
    const seq = await w.append([phase("retried", 1)]);
    // The same writer position again: same message id, same expected sequence as the first try.
    const again = new LogWriter(deps, "retried", "worker-a", 0, 0);
    expect(await again.append([phase("retried", 1)])).toBe(seq);
    expect((await readLog(deps, "retried")).records).toHaveLength(1);
  });

  it("a record over the server's max_payload (a checkpoint of a long transcript) is written in parts and read back whole", async () => {
    const max = deps.nc.info?.max_payload ?? 0;
    expect(max).toBeGreaterThan(0);
    const transcript = Array.from({ length: 40 }, (_, i) => ({
      role: "tool",
      content: `${i}é${noise(80_000)}`,
    }));
    const big: WalRecord = {
      schemaVersion: 1,
      runId: "big",
      iteration: 2,
      at: 2,
      type: "CHECKPOINT",
      checkpointId: "c",
      stateHash: "h",
      state: { messages: transcript },
    };
    expect(JSON.stringify(big).length).toBeGreaterThan(2 * max);
    const w = new LogWriter(deps, "big", "worker-a", 0, 0);
    await w.append([phase("big", 1)]);
    const seq = await w.append([big]);
    await w.append([phase("big", 3)]);
    const read = await readLog(deps, "big");
    expect(read.records.map((r) => r.record)).toEqual([phase("big", 1), big, phase("big", 3)]);
    expect(read.records[1]?.seq).toBe(seq);
    expect(read.messages).toBeGreaterThanOrEqual(5);
    // The sequence append returned is where a resume reads from to get the whole record back.
    const tail = await readLog(deps, "big", seq);
    expect(tail.records.map((r) => r.record)).toEqual([big, phase("big", 3)]);
    // A writer positioned after this read appends without being fenced.
    await writerAfter(deps, "big", "worker-b", read).append([phase("big", 4)]);
    expect((await readLog(deps, "big")).records).toHaveLength(4);
  });

  it("one transition's records travel as one message, share its sequence and read back in order, beside single-record messages", async () => {
    const w = new LogWriter(deps, "batched", "worker-a", 0, 0);
    const first = await w.append([phase("batched", 1)]);
    const batch = [phase("batched", 2), phase("batched", 3), phase("batched", 4)];
    const seq = await w.append(batch);
    await w.append([phase("batched", 5)]);
    const read = await readLog(deps, "batched");
    expect(read.messages).toBe(3);
    expect(read.records.map((r) => r.record.iteration)).toEqual([1, 2, 3, 4, 5]);
    expect(read.records.map((r) => r.seq)).toEqual([first, seq, seq, seq, seq + 1]);
    // Reading from the batch's sequence gets the whole batch back.
    const tail = await readLog(deps, "batched", seq);
    expect(tail.records.map((r) => r.record.iteration)).toEqual([2, 3, 4, 5]);
    // A batch is fenced like a single record.
    const stale = writerAfter(deps, "batched", "worker-b", { ...read, lastSeq: first, messages: 1 });
    await expect(stale.append([phase("batched", 6), phase("batched", 7)])).rejects.toMatchObject({
      code: "FENCED",
    });
  });

  it("a batch over the server's max_payload is written in parts and read back as its records", async () => {
    const max = deps.nc.info?.max_payload ?? 0;
    const wide = (n: number): WalRecord => ({
      schemaVersion: 1,
      runId: "wide",
      iteration: n,
      at: n,
      type: "PHASE",
      from: null,
      to: "ACT",
      reason: noise(max / 2),
    });
    const w = new LogWriter(deps, "wide", "worker-a", 0, 0);
    const committed = lifecycleEvent("wide", "run.committed");
    const seq = await w.append([wide(1), wide(2), wide(3)], [committed]);
    const read = await readLog(deps, "wide");
    expect(read.messages).toBeGreaterThanOrEqual(2);
    expect(read.records.map((r) => [r.seq, r.record.iteration])).toEqual([
      [seq, 1],
      [seq, 2],
      [seq, 3],
    ]);
    expect(read.events).toEqual([committed]);
    // A consumer filtering by headline gets every part: the last one reads the whole message.
    const stream = deps.subjects.streams().log;
    const parts = [];
    for (let at = seq; at <= read.lastSeq; at++)
      parts.push(await deps.jsm.streams.getMessage(stream, { seq: at }));
    const got = await Promise.all(
      parts.map((m) =>
        entryOfMessage(deps, { subject: m!.subject, seq: m!.seq, data: m!.data, headers: m!.header }),
      ),
    );
    expect(got.slice(0, -1)).toEqual(parts.slice(0, -1).map(() => undefined));
    expect(got.at(-1)?.events).toEqual([committed]);
    expect(got.at(-1)?.records).toHaveLength(3);
    // Looked up by its headline, it is read whole, at its last part's sequence (the one consumers see).
    expect(await lastAuditEvent(deps, "wide", "run.committed")).toEqual({
      streamSeq: read.lastSeq,
      event: committed,
    });
    expect(await auditCount(deps, "wide")).toBe(1);
  });

  it("the fence covers the run's every subject: a write under another headline fences a stale writer", async () => {
    const a = new LogWriter(deps, "fenced-wide", "worker-a", 0, 0);
    const b = new LogWriter(deps, "fenced-wide", "worker-b", 0, 0);
    await a.append([], [lifecycleEvent("fenced-wide", "run.halted")]);
    await expect(b.append([phase("fenced-wide", 1)])).rejects.toMatchObject({ code: "FENCED" });
  });

  it("a log an earlier build wrote in format 1 is read, looked up and written after like one in format 2", async () => {
    const runId = "format-one";
    const admitted = lifecycleEvent(runId, "run.admitted", 1);
    const started = { ...lifecycleEvent(runId, "phase.entered", 2), phase: "PLAN" as const };
    // What the build before format 2 stored: the entry's JSON as it is, every item whole.
    const old = new TextEncoder().encode(
      JSON.stringify({ records: [phase(runId, 1)], events: [admitted, started] }),
    );
    const headers = { msgID: `${runId}:1:old-worker`, expectLastSubjectSequence: 0 };
    await AckPublisher.of(deps.nc).publish(deps.subjects.log(runId, "run.admitted"), old, headers);
    const before = await readLog(deps, runId);
    expect(before.records.map((r) => r.record)).toEqual([phase(runId, 1)]);
    expect(before.events).toEqual([admitted, started]);
    expect(before.lastWriter).toBe("old-worker");
    expect(await auditCount(deps, runId)).toBe(2);
    // A worker of this build takes the run over: its message follows, in format 2.
    const committed = lifecycleEvent(runId, "run.committed", 3);
    await writerAfter(deps, runId, "new-worker", before).append([phase(runId, 2)], [committed]);
    const after = await readLog(deps, runId);
    expect(after.records.map((r) => r.record)).toEqual([phase(runId, 1), phase(runId, 2)]);
    expect(after.events).toEqual([admitted, started, committed]);
    expect((await lastAuditEvent(deps, runId, "run.admitted"))?.event).toEqual(admitted);
    expect((await lastAuditEvent(deps, runId, "run.committed"))?.event).toEqual(committed);
    const events = [];
    for await (const event of readAudit(deps, { runId })) events.push(event);
    expect(events).toEqual([admitted, started, committed]);
  });

  it("an empty batch is refused before anything is sent", async () => {
    const w = new LogWriter(deps, "nothing", "worker-a", 0, 0);
    await expect(w.append([])).rejects.toMatchObject({ code: "INTERNAL" });
    expect(await readLog(deps, "nothing")).toEqual({
      records: [],
      events: [],
      lastSeq: 0,
      messages: 0,
      fromSeq: 1,
    });
  });

  it("an empty WAL reads as no records", async () => {
    expect(await readLog(deps, "never-written", "checkpoint")).toEqual({
      records: [],
      events: [],
      lastSeq: 0,
      messages: 0,
      fromSeq: 1,
    });
  });
});
