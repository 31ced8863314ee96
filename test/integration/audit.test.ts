import { describe, expect, it } from "vitest";
import { publishAudit, readAudit } from "../../shared/bus/audit.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { echoCall, runner, spec } from "../helpers/fixtures.js";

const deps = useBusSuite("a");

async function collect(options: Parameters<typeof readAudit>[1]): Promise<AuditEvent[]> {
  const events: AuditEvent[] = [];
  for await (const event of readAudit(deps, options)) events.push(event);
  return events;
}

describe("the audit stream on JetStream", () => {
  it("a subscriber sees every event of a run, schema-valid, in order, seq gapless from 1", async () => {
    const result = await runner().run(spec({ script: [echoCall("x"), { text: "done" }] }), {
      runId: "audited",
    });
    for (const event of result.audit) await publishAudit(deps, event);
    const other = await runner().run(spec(), { runId: "other-run" });
    for (const event of other.audit) await publishAudit(deps, event);

    const events = await collect({ runId: "audited" });
    expect(events).toEqual(result.audit);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.at(-1)?.kind).toBe("run.committed");
    expect(await collect({})).toHaveLength(result.audit.length + other.audit.length);
    expect(await collect({ limit: 3 })).toHaveLength(3);
    expect(await collect({ runId: "nobody" })).toEqual([]);
  });

  it("re-publishing an event (a resumed worker, a retry) does not store it twice", async () => {
    const result = await runner().run(spec(), { runId: "republished" });
    for (const event of result.audit) await publishAudit(deps, event);
    for (const event of result.audit) await publishAudit(deps, event);
    expect(await collect({ runId: "republished" })).toHaveLength(result.audit.length);
  });
});
