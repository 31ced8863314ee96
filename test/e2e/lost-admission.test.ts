import { describe, expect, it } from "vitest";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { queuedStatus } from "../helpers/fixtures.js";
import { until } from "../helpers/until.js";

const STALL_MS = 1_500;

/**
 * What a supervisor SIGKILLed in the middle of admissions leaves when no client submits the runs
 * again: a slot and a queued status with no job, and a slot with no status at all. The supervisor
 * that is left finds both on its own within a few stall periods.
 */
const suite = useClusterSuite("lost-admission", {
  actors: [{ kind: "supervisor", env: { SUPERVISOR_STALL_MS: String(STALL_MS) } }],
});

describe("admissions a killed supervisor left unfinished", () => {
  it("are settled by a live supervisor: the queued run fails as ADMISSION_LOST, both slots are freed", async () => {
    const pool = PoolLedger.of(suite.bus);
    const queued = "left-queued";
    await pool.acquire(queued, 100);
    await new RunStatusStore(suite.bus.buckets.runs).put(queuedStatus(queued));
    await pool.acquire("left-unrecorded", 100);

    // The supervisor's scan counts them before it settles them, and none once it has.
    const holding = async (): Promise<string[]> => {
      const port = suite.cluster.actors.get("supervisor")?.healthPort;
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const series = /^agents_runs_holding_slot\{status="(queued|unrecorded)"[^}]*\} (\d+)$/;
      return text.split("\n").flatMap((line) => {
        const match = series.exec(line);
        return match ? [`${match[1]} ${match[2]}`] : [];
      });
    };
    await until(async () => (await holding()).join() === "queued 1,unrecorded 1", 10 * STALL_MS, {
      what: "both runs counted as holding a slot",
      everyMs: 100,
    });

    const status = await suite.waitFor(queued, settled, 10 * STALL_MS);
    expect(status.status).toBe("failed");
    expect(status.terminal?.reason).toMatch(/^\[ADMISSION_LOST\]/);
    expect((await suite.audit(queued)).map((e) => [e.kind, e.actor])).toEqual([["run.failed", "supervisor"]]);
    await until(async () => (await pool.active()).length === 0, 10 * STALL_MS, {
      what: "both slots freed",
    });
    await until(async () => (await holding()).join() === "queued 0,unrecorded 0", 10 * STALL_MS, {
      what: "no run counted as holding a slot",
      everyMs: 100,
    });
    const log = await suite.log("supervisor");
    expect(log).toMatch(/"runId":"left-unrecorded"[^\n]*slot freed/);
    expect(log).toMatch(/"runId":"left-queued"[^\n]*failed as ADMISSION_LOST/);
  }, 30_000);
});
