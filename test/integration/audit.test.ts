import { describe, expect, it } from "vitest";
import { auditCount, lastAuditEvent, readAudit, recordRejection } from "../../shared/bus/audit.js";
import { LogWriter } from "../../shared/bus/run-log.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { echoCall, runner, spec } from "../helpers/fixtures.js";
import { publishEvent } from "../helpers/log.js";

const deps = useBusSuite("a");

async function collect(options: Parameters<typeof readAudit>[1]): Promise<AuditEvent[]> {
  const events: AuditEvent[] = [];
  for await (const event of readAudit(deps, options)) events.push(event);
  return events;
}

describe("the audit trail in the run log", () => {
  it("a subscriber sees every event of a run, schema-valid, in order, seq gapless from 1", async () => {
    const result = await runner().run(spec({ script: [echoCall("x"), { text: "done" }] }), {
      runId: "audited",
    });
    for (const event of result.audit) await publishEvent(deps, event);
    const other = await runner().run(spec(), { runId: "other-run" });
    for (const event of other.audit) await publishEvent(deps, event);

    const events = await collect({ runId: "audited" });
    expect(events).toEqual(result.audit);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.at(-1)?.kind).toBe("run.committed");
    expect(await collect({})).toHaveLength(result.audit.length + other.audit.length);
    expect(await collect({ limit: 3 })).toHaveLength(3);
    expect(await collect({ runId: "nobody" })).toEqual([]);
    expect(await auditCount(deps, "audited")).toBe(result.audit.length);
    expect(await auditCount(deps, "nobody")).toBe(0);
  });

  it("finds a run's latest event of a kind, under its own headline or carried by a later one", async () => {
    const result = await runner().run(spec(), { runId: "looked-up" });
    const [first, ...rest] = result.audit;
    const event = (seq: number, kind: AuditEvent["kind"]): AuditEvent => ({
      ...(first as AuditEvent),
      auditId: `looked-up:${seq}`,
      seq,
      kind,
    });
    const writer = new LogWriter(deps, "looked-up", "w1", 0, 0);
    await writer.append([], [first as AuditEvent]);
    const decided = await writer.append([], [event(2, "approval.decided")]);
    // Decided again, and committed, in one transition: the message is the commit's.
    const committed = await writer.append([], [event(3, "approval.decided"), event(4, "run.committed")]);
    expect(rest.length).toBeGreaterThan(0);
    expect(await lastAuditEvent(deps, "looked-up", "approval.decided")).toMatchObject({
      streamSeq: committed,
      event: { seq: 3 },
    });
    expect(decided).toBeLessThan(committed);
    expect(await lastAuditEvent(deps, "looked-up", "run.committed")).toMatchObject({ event: { seq: 4 } });
    expect(await lastAuditEvent(deps, "looked-up", "run.halted")).toBeUndefined();
  });

  it("a refused submit is kept outside the run's log, and read in its place among the run's events", async () => {
    const refused: AuditEvent = {
      schemaVersion: 1,
      auditId: "refused-once:rejected:1",
      runId: "refused-once",
      rootRunId: "refused-once",
      seq: 1,
      iteration: 0,
      phase: "PLAN",
      kind: "run.rejected",
      actor: "supervisor",
      status: "failed",
      reason: "pool full",
      artifacts: [],
      timestamp: new Date().toISOString(),
    };
    await recordRejection(deps, refused);
    expect(await auditCount(deps, "refused-once")).toBe(0);
    const result = await runner().run(spec(), { runId: "refused-once" });
    for (const event of result.audit) await publishEvent(deps, event);
    expect((await collect({ runId: "refused-once" })).map((e) => e.kind)).toEqual([
      "run.rejected",
      ...result.audit.map((e) => e.kind),
    ]);
  });
});
