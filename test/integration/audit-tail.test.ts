import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { tailAudit, type TailOptions } from "../../services/cli/audit-tail.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { lifecycle } from "../helpers/finished-runs.js";
import { until } from "../helpers/until.js";

const suite = useBusSuite("tail");

const ids = (events: AuditEvent[]): string[] => events.map((e) => e.auditId);

async function tail(
  options: Omit<TailOptions, "follow">,
): Promise<{ events: AuditEvent[]; leftOut: number[] }> {
  const leftOut: number[] = [];
  const events: AuditEvent[] = [];
  for await (const e of tailAudit(suite, { ...options, follow: false, onLeftOut: (n) => leftOut.push(n) }))
    events.push(e);
  return { events, leftOut };
}

describe("agentctl audit tail", () => {
  it("the last n events of the stream or of one run, saying how many earlier ones it left out; then, following, only new ones", async () => {
    // Two runs' events interleaved: a1 b1 a2 b2 … a5 b5.
    for (let seq = 1; seq <= 5; seq++) {
      await lifecycle(suite, "run-a", "phase.entered", seq);
      await lifecycle(suite, "run-b", "phase.entered", seq);
    }
    const last3 = await tail({ last: 3 });
    expect(ids(last3.events)).toEqual(["run-b:4", "run-a:5", "run-b:5"]);
    expect(last3.leftOut).toEqual([7]);
    expect(ids((await tail({ runId: "run-a", last: 2 })).events)).toEqual(["run-a:4", "run-a:5"]);
    expect((await tail({ runId: "run-a", last: 2 })).leftOut).toEqual([3]);
    // Asked for more than there are, or for all: every one, nothing left out.
    const whole = await tail({ runId: "run-b", last: 50 });
    expect(ids(whole.events)).toEqual([1, 2, 3, 4, 5].map((n) => `run-b:${n}`));
    expect(whole.leftOut).toEqual([]);
    expect((await tail({})).events).toHaveLength(10);
    expect((await tail({ runId: "nobody", last: 5 })).events).toEqual([]);

    // Following a run: its last event, then the new ones, none twice, none of the other run's.
    const stop = new AbortController();
    const seen: AuditEvent[] = [];
    const following = (async () => {
      for await (const e of tailAudit(suite, { runId: "run-a", last: 1, follow: true, signal: stop.signal }))
        seen.push(e);
    })();
    await until(() => Promise.resolve(seen.length === 1), 10_000, { what: "the run's last event" });
    await lifecycle(suite, "run-b", "phase.entered", 6);
    await lifecycle(suite, "run-a", "phase.entered", 6);
    await lifecycle(suite, "run-a", "phase.entered", 7);
    await until(() => Promise.resolve(seen.length === 3), 10_000, { what: "the two new events" });
    stop.abort();
    await following;
    expect(ids(seen)).toEqual(["run-a:5", "run-a:6", "run-a:7"]);
  });
});
