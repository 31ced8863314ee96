import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { recordRejection } from "../../shared/bus/audit.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { tailAudit, type TailOptions } from "../../services/cli/audit-tail.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { AGENTCTL, credentials, runProcess } from "../helpers/cluster-suite.js";
import { lifecycle, lifecycleEvent } from "../helpers/finished-runs.js";
import { queuedStatus } from "../helpers/fixtures.js";
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
  // First: the suite's stream is empty until the next test writes to it.
  it("of an empty stream: no event, and none said to be left out, with --all, -n or neither", async () => {
    for (const options of [{}, { last: 5 }, { last: undefined }])
      expect(await tail(options)).toEqual({ events: [], leftOut: [] });
  });

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

  it("a run the cluster does not know is NOT_FOUND; one known by its log, its status or a refused submit is not", async () => {
    await expect(tail({ runId: "nobody", last: 5 })).rejects.toMatchObject({
      code: "NOT_FOUND",
      message: `no run 'nobody' under AGENTS_PREFIX '${suite.subjects.prefix}': no log, status or refused submit names it`,
    });
    // A refused submit is the run id's whole trail; an admitted run whose first message is not
    // read yet has a status and an empty trail; a run with a log and no status (retention removed
    // it, as "run-a" above never had one) has its events.
    await recordRejection(suite, lifecycleEvent("refused-run", "run.rejected"));
    expect(ids((await tail({ runId: "refused-run" })).events)).toEqual(["refused-run:1"]);
    await new RunStatusStore(suite.buckets.runs).put(queuedStatus("queued-run"));
    expect((await tail({ runId: "queued-run" })).events).toEqual([]);
    await lifecycle(suite, "logged-run", "run.admitted");
    expect(ids((await tail({ runId: "logged-run" })).events)).toEqual(["logged-run:1"]);
    // agentctl says so as its one JSON error line, exit code 2.
    const env = {
      ...process.env,
      NATS_URL: suite.server.url,
      AGENTS_PREFIX: suite.subjects.prefix,
      ...credentials(suite.server),
    };
    const failed = await runProcess(process.execPath, [AGENTCTL, "audit", "tail", "nobody"], { env }).then(
      () => ({ code: 0, stderr: "" }),
      (err: { code: number; stderr: string }) => err,
    );
    expect(failed.code).toBe(2);
    expect(JSON.parse(failed.stderr)).toMatchObject({ error: { code: "NOT_FOUND" } });
  });

  it("-n 0 with follow: only the events that come after, of a known run or one not submitted yet", async () => {
    await lifecycle(suite, "old-run", "run.admitted");
    await lifecycle(suite, "old-run", "phase.entered", 2);
    // The runs a consumer on the log follows: a follower's consumer exists once it has read what is held.
    const followed = async (): Promise<string[]> => {
      const infos = await suite.jsm.consumers.list(suite.subjects.streams().log).next();
      const filters = infos.flatMap((info) => info.config.filter_subjects ?? []);
      return ["old-run", "new-run"].filter((runId) => filters.includes(suite.subjects.logAll(runId)));
    };
    const stop = new AbortController();
    const seen: AuditEvent[] = [];
    let unknown = 0;
    const leftOut: number[] = [];
    const follow = (runId: string) =>
      (async () => {
        for await (const e of tailAudit(suite, {
          runId,
          last: 0,
          follow: true,
          signal: stop.signal,
          onLeftOut: (n) => leftOut.push(n),
          onUnknownRun: () => unknown++,
        }))
          seen.push(e);
      })();
    const following = [follow("old-run"), follow("new-run")];
    // Once both consumers exist, what each read as held is behind it: the events below are new.
    await until(async () => (await followed()).length === 2, 10_000, { what: "the two followers" });
    await lifecycle(suite, "old-run", "phase.entered", 3);
    await lifecycle(suite, "new-run", "run.admitted");
    await until(() => Promise.resolve(seen.length === 2), 10_000, { what: "the two new events" });
    stop.abort();
    await Promise.all(following);
    expect(ids(seen).sort()).toEqual(["new-run:1", "old-run:3"]);
    // Only the run not submitted yet was told unknown; nothing was "left out" of what -n 0 skips.
    expect({ unknown, leftOut }).toEqual({ unknown: 1, leftOut: [] });
  });
});
