import { beforeAll, describe, expect, it, vi } from "vitest";
import { encode } from "../../shared/bus/codec.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { ResumeRequest } from "../../shared/contracts/cluster.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { resumeRun } from "../../services/supervisor/resume.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { treeStatus } from "../helpers/fixtures.js";
import { queuedJobs, queuedJobKinds } from "../../shared/bus/jobs.js";

const suite = useActorBus("ro");
let store: RunStatusStore;

beforeAll(() => {
  store = new RunStatusStore(suite.bus.buckets.runs);
});

const FAILED = "[RUN_CANCELLED] cancelled by oncall: wrong trip";

/** A child an operator halted, under a parent in `parent`'s state (no parent status: "gone"). */
async function haltedChild(parentRunId: string, parent: RunStatus["status"] | "failing" | "gone") {
  const childRunId = `${parentRunId}-child`;
  if (parent !== "gone")
    await store.put(treeStatus(parentRunId, parent, parent === "failed" ? { reason: FAILED } : {}));
  await store.put(treeStatus(childRunId, "halted", { parentRunId, reason: "stuck" }));
  return childRunId;
}

const resume = (runId: string, o: { tree?: boolean; pool?: PoolLedger } = {}) =>
  resumeRun(
    suite.bus,
    o.pool ?? PoolLedger.of(suite.bus),
    1_000,
    encode(ResumeRequest, { runId, by: "oncall", ...(o.tree ? { tree: true } : {}) }),
  );

/** What the resume threw (it must throw). */
async function refusal(resuming: Promise<unknown>): Promise<AgentError> {
  const err = await resuming.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AgentError);
  return err as AgentError;
}

/** The events of the run's jobs on the work queue, oldest first ("start" for a start job). */
const jobEvents = async (runId: string) => await queuedJobKinds(suite.bus, runId);

describe("resuming a halted child whose parent can no longer take its result", () => {
  it.each([
    ["failed", `its parent ro-failed failed: ${FAILED}`],
    ["failing", "its parent ro-failing is failing"],
    ["committed", "its parent ro-committed committed"],
    ["gone", "its parent ro-gone has finished and its status is gone"],
  ] as const)(
    "is refused, its parent %s (PARENT_FINISHED, the child stays halted, no job, no pool slot)",
    async (state, why) => {
      const childRunId = await haltedChild(`ro-${state}`, state);
      const pool = PoolLedger.of(suite.bus);
      const err = await refusal(resume(childRunId, { pool }));
      expect(err.code).toBe("PARENT_FINISHED");
      expect(err.retryable).toBe(false);
      expect(err.message).toBe(
        `run '${childRunId}' stays halted: ${why}. Nobody would take its result, and what it did would stand: cancel it instead (agentctl cancel ${childRunId}), which undoes its completed calls`,
      );
      expect(await jobEvents(childRunId)).toEqual([]);
      expect(await pool.active()).not.toContain(childRunId);
      expect(await store.get(childRunId)).toMatchObject({ status: "halted" });
    },
    30_000,
  );

  it("resumes a child whose parent is still going: one resume job, no cancel", async () => {
    const childRunId = await haltedChild("ro-going", "running");
    expect(await resume(childRunId)).toMatchObject({ ok: true, message: `run ${childRunId}: resume queued` });
    expect(await jobEvents(childRunId)).toEqual(["resume"]);
  }, 30_000);

  it("cancels the child it resumed when the parent began to undo its calls after the resume read it", async () => {
    const childRunId = await haltedChild("ro-late", "running");
    const pool = PoolLedger.of(suite.bus);
    const acquire = pool.acquire.bind(pool);
    // Between the resume's read of the parent and its job: its slot's acquire.
    vi.spyOn(pool, "acquire").mockImplementation(async (...args) => {
      await store.put(treeStatus("ro-late", "failing"));
      return acquire(...args);
    });
    expect(await resume(childRunId, { pool })).toMatchObject({ ok: true });
    const jobs = await queuedJobs(suite.bus, childRunId);
    expect(jobs.map((j) => j?.event?.type)).toEqual(["resume", "cancel"]);
    expect(jobs[1]?.event).toMatchObject({ by: "supervisor", reason: "its parent ro-late is failing" });
  }, 30_000);

  it("a tree's resume leaves halted the children of a failed run in it, resumes the rest, and names what it left", async () => {
    // ro-tree (halted) → ro-tree-a (halted), ro-tree-f (failed) → ro-tree-f-g (halted).
    await store.put(treeStatus("ro-tree", "halted", { reason: "stuck" }));
    const under = (parentRunId: string, depth: number) => ({ parentRunId, rootRunId: "ro-tree", depth });
    await store.put(treeStatus("ro-tree-a", "halted", { ...under("ro-tree", 1), reason: "stuck" }));
    await store.put(treeStatus("ro-tree-f", "failed", { ...under("ro-tree", 1), reason: FAILED }));
    await store.put(treeStatus("ro-tree-f-g", "halted", { ...under("ro-tree-f", 2), reason: "stuck" }));
    const reply = await resume("ro-tree", { tree: true });
    const why = `its parent ro-tree-f failed: ${FAILED}`;
    expect(reply).toMatchObject({
      ok: true,
      message: `tree ro-tree: resume queued for 2 run(s): ro-tree-a, ro-tree; left halted, their parents can take no result (cancel them instead): ro-tree-f-g (${why})`,
      data: { runIds: ["ro-tree-a", "ro-tree"], leftHalted: [{ runId: "ro-tree-f-g", why }] },
    });
    expect(await jobEvents("ro-tree-a")).toEqual(["resume"]);
    expect(await jobEvents("ro-tree")).toEqual(["resume"]);
    expect(await jobEvents("ro-tree-f-g")).toEqual([]);
    // Resumed from the failed run, nothing of its tree can resume.
    const err = await refusal(resume("ro-tree-f", { tree: true }));
    expect(err.code).toBe("PARENT_FINISHED");
    expect(err.message).toBe(
      `no halted run of tree 'ro-tree-f' can resume: ro-tree-f-g (${why}). Cancel them instead: a cancel undoes their completed calls`,
    );
  }, 30_000);
});
