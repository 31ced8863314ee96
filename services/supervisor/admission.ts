import { z } from "zod";
import type { RunJob, SubmitRequest } from "../../shared/contracts/cluster.js";
import type { SubmitReply } from "../../shared/contracts/control.js";
import type { RunSpec } from "../../shared/contracts/run-spec.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { auditTally, lastAuditEvent } from "../../shared/bus/audit.js";
import { hasQueuedJob, publishJob } from "../../shared/bus/jobs.js";
import { readKillSwitch } from "../../shared/bus/kill-switch.js";
import type { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { isUndecided } from "../../shared/bus/decided.js";
import { isFinished, takesNoChildResults, type RunStatus } from "../../shared/contracts/run-status.js";
import {
  capReached,
  openTree,
  readIterations,
  readTreeBudget,
  retired,
} from "../../shared/bus/tree-iterations.js";
import { hasSpendBudget, readSpend, spentBudget } from "../../shared/bus/tree-spend.js";
import { DEFAULT_PRICES } from "../../shared/models/default-prices.js";
import type { PriceTable } from "../../shared/models/pricing.js";
import { toRfc3339 } from "../../shared/runtime/clock.js";
import { AgentError, toAgentError } from "../../shared/runtime/errors.js";
import type { IdGenerator } from "../../shared/runtime/ids.js";
import type { ActorMetrics } from "../../shared/runtime/metrics.js";
import { recordAdmitted, recordRejected } from "./admission-events.js";
import { cancelOrphans } from "./cancel.js";
import type { WorkerPolicies } from "./worker-policies.js";
import {
  checkGrantedPaths,
  checkPrices,
  checkPrivacy,
  existing,
  notParentOf,
  parseSubmit,
  rejected,
  treeSpendOf,
} from "./submit-request.js";

export interface AdmissionLimits {
  /** Runs active at once across the cluster (every supervisor replica shares the ledger). */
  poolCapacity: number;
  /** Deepest spawn allowed: a root run is depth 0. */
  maxDepth: number;
  /**
   * Model calls a whole run tree may make, written for the tree as its root is admitted; a child of
   * a spent tree is refused with GLOBAL_CAP.
   */
  treeIterationCap: number;
  /** The models' prices (MODEL_PRICES…): a run with a cost budget naming a model without one is refused. Absent: the defaults. */
  prices?: PriceTable;
}

/**
 * Admission control on `<prefix>.runs.submit`. Every decision reads and writes shared state in
 * JetStream KV with compare-and-set, so any number of supervisor replicas decide consistently.
 * Idempotent by runId: a second submit of a known run answers "existing" and starts nothing.
 */
export class Admission {
  private readonly status: RunStatusStore;

  constructor(
    private readonly bus: ActorBus,
    private readonly pool: PoolLedger,
    private readonly limits: AdmissionLimits,
    private readonly ids: IdGenerator,
    private readonly metrics?: ActorMetrics,
    /** The policies the live workers register (absent: a registered policy is not checked). */
    private readonly workerPolicies?: Pick<WorkerPolicies, "check">,
  ) {
    this.status = new RunStatusStore(bus.buckets.runs);
  }

  async submit(data: Uint8Array): Promise<SubmitReply> {
    let request: SubmitRequest;
    let asked: string;
    try {
      ({ request, specHash: asked } = parseSubmit(data));
    } catch (err) {
      const error = toAgentError(err);
      this.metrics?.runsRejected.inc({ code: error.code });
      return rejected(error);
    }
    const runId = request.runId ?? this.ids.next("run").replaceAll(/[^A-Za-z0-9_-]/g, "_");
    // Only a run named by its submitter can have a log already.
    const named = request.runId !== undefined;
    const rootRunId = await this.rootOf(request, runId);
    const depth = request.parent ? request.parent.depth + 1 : 0;
    try {
      const ids = { runId, rootRunId, depth, named, specHash: asked };
      // An id this supervisor just made names no run yet: only a named run is looked up (a round trip less).
      const known = named ? await this.status.read(runId) : undefined;
      if (known) return await this.answerKnown(request, ids, known);
      // A named run without a status may be one whose status retention removed (see
      // SUPERVISOR_STATUS_RETAIN_MS): its log tells.
      const tally = named ? await auditTally(this.bus, runId) : undefined;
      if (tally?.finished) {
        // Another copy of this submit may have admitted the run, which then finished, since the read.
        const since = await this.status.read(runId);
        if (since) return await this.answerKnown(request, ids, since);
        throw new AgentError(
          "RUN_REMOVED",
          `run ${runId} finished, and its status was removed after the cluster's retention: its id cannot start a run again (its audit trail keeps what it did; submit under a new id)`,
        );
      }
      checkPrivacy(request);
      checkGrantedPaths(request);
      checkPrices(request, this.limits.prices ?? DEFAULT_PRICES);
      await this.workerPolicies?.check(request.policy);
      await this.check(depth);
      if (request.parent) {
        await this.checkBudget(rootRunId);
        await this.checkParent(request.parent.runId);
      }
      const slot = await this.pool.acquire(runId, this.limits.poolCapacity);
      if (slot === "existing") {
        // A slot and no status: the supervisor that took the slot stopped before recording the run,
        // or another copy of this submit is being admitted now (and the status it writes first wins).
        if (await this.finishAdmission(request, ids)) return existing(runId);
        return await this.lostToCopy(request, ids);
      }
      if (await this.admit(request, ids)) {
        this.metrics?.runsAdmitted.inc();
        return { schemaVersion: 1, ok: true, runId, status: "admitted" };
      }
      return await this.lostToCopy(request, ids);
    } catch (err) {
      const error = toAgentError(err);
      this.metrics?.runsRejected.inc({ code: error.code });
      if (isUndecided(error)) return this.undecided(error, runId);
      const ids = { runId, rootRunId, parentRunId: request.parent?.runId, named };
      await recordRejected(this.bus, ids, error).catch((e: unknown) =>
        this.bus.logger.error({ err: e, runId }, "could not record a rejection"),
      );
      this.bus.logger.warn({ runId, code: error.code }, `run rejected: ${error.message}`);
      return rejected(error);
    }
  }

  /** A submit of a run that has a status: answered `existing`, unless its id names another run. */
  private async answerKnown(
    request: SubmitRequest,
    ids: AdmittedIds,
    known: { status: RunStatus; revision: number },
  ): Promise<SubmitReply> {
    const taken = request.parent
      ? notParentOf(known.status, request.parent.runId)
      : await this.specConflict(ids.specHash, known.status);
    if (taken) return this.refuseTaken(taken, ids.runId);
    if (known.status.status === "queued") await this.finishAdmission(request, ids, known.revision);
    return existing(ids.runId);
  }

  /**
   * Another copy of this submit wrote the run's status first: a client resends a named submit whose
   * reply a dropped connection lost (see ServiceWait), and after an outage both copies reach the
   * supervisors together. Answered as the copy that came second is. The slot taken here is the
   * run's, unless the run finished (and freed its own) before it was taken: then it is freed.
   */
  private async lostToCopy(request: SubmitRequest, ids: AdmittedIds): Promise<SubmitReply> {
    this.bus.logger.info({ runId: ids.runId }, "another copy of this submit admitted the run first");
    const known = await this.status.read(ids.runId);
    if (isFinished(known?.status)) await this.pool.release(ids.runId);
    return known ? this.answerKnown(request, ids, known) : existing(ids.runId);
  }

  /**
   * A named run submitted again with another spec than the one it was admitted with: a client that
   * reuses an id for new work (an order amended, say) would otherwise get "existing" and the first
   * spec's result. Compared by the hash its `run.admitted` event keeps; a run admitted by a build
   * before that hash is taken as it was. A spawned child is not compared: its parent re-sends the
   * spec its WAL recorded, and a refusal would be written into the child's status as its failure.
   * A run still queued keeps the hash in its status (its `run.admitted` may not be written yet).
   */
  private async specConflict(asked: string, known: RunStatus): Promise<AgentError | undefined> {
    const { runId } = known;
    const admitted =
      known.specHash === undefined ? await lastAuditEvent(this.bus, runId, "run.admitted") : undefined;
    const recorded = known.specHash ?? AdmittedData.safeParse(admitted?.event.data ?? {}).data?.specHash;
    if (recorded === undefined || recorded === asked) return undefined;
    // Still queued, the status was written at the admission.
    const when = admitted?.event.timestamp ?? known.updatedAt;
    return new AgentError(
      "RUN_ID_TAKEN",
      `run ${runId} was submitted with another spec (admitted ${when}): a run id names one spec, so this one was not started; submit it under a new id`,
    );
  }

  /**
   * JetStream out of reach (or a fault of this supervisor's) before the run was decided: answered
   * at once, without a `run.rejected`, whose write would wait out the same outage past the client's
   * timeout and record a decision nobody made. A named run's client asks again (see submitRun); what
   * this admission had written by then is finished by that copy, or by the lost-admission sweep.
   */
  private undecided(error: AgentError, runId: string): SubmitReply {
    // A full store refuses every submit the same way: its message says it all, without a stack each.
    const err = error.code === "STORAGE_FULL" ? {} : { err: error.cause ?? error };
    this.bus.logger.warn({ runId, code: error.code, ...err }, `submit not decided: ${error.message}`);
    // The bare cause ("timeout") tells a client nothing of what happened to its run.
    const message = `the supervisor could not decide the submit of run ${runId} (${error.message}): it was not refused; submit it again under the same runId, answered existing if it was admitted`;
    return rejected(new AgentError(error.code, message, { cause: error, details: error.details }));
  }

  /** Refused without an audit event: the run's trail is its own worker's, whose next `seq` this would race. */
  private refuseTaken(error: AgentError, runId: string): SubmitReply {
    this.metrics?.runsRejected.inc({ code: error.code });
    this.bus.logger.warn({ runId, code: error.code }, `submit refused: ${error.message}`);
    return rejected(error);
  }

  /** A child belongs to its parent's run tree; a root run is its own root. */
  private async rootOf(request: SubmitRequest, runId: string): Promise<string> {
    const parent = request.parent;
    if (!parent) return runId;
    if (parent.rootRunId) return parent.rootRunId;
    const status = await this.status.get(parent.runId).catch(() => undefined);
    return status?.rootRunId ?? parent.runId;
  }

  /**
   * A child of a parent that has finished, or is undoing its calls before it fails, would have
   * nobody to take its result: refused. The one way here is a parent cancelled in the middle of its
   * spawn, whose worker goes on submitting the children after the cancel's undo (or the
   * supervisor's pass, see cancelOrphans) cancelled those it found.
   */
  private async checkParent(parentRunId: string): Promise<void> {
    const parent = await this.status.get(parentRunId);
    if (parent && takesNoChildResults(parent)) {
      const state = isFinished(parent) ? parent.status : "undoing its calls before it fails";
      throw new AgentError(
        "PARENT_FINISHED",
        `parent run ${parentRunId} is ${state}: a child would have nobody to take its result`,
      );
    }
  }

  /**
   * A child's tree must have a cap (its root's admission wrote it; a tree without one was retired)
   * and iterations left on its counter.
   */
  private async checkBudget(rootRunId: string): Promise<void> {
    const [budget, used] = await Promise.all([
      readTreeBudget(this.bus.buckets.pool, rootRunId),
      readIterations(this.bus, rootRunId),
    ]);
    if (budget === undefined) throw retired(rootRunId);
    if (used >= budget.cap) throw capReached(rootRunId, budget.cap, used);
    if (!hasSpendBudget(budget)) return;
    // A tree past its root's cost or token budget takes no more children either.
    const over = spentBudget(rootRunId, budget, await readSpend(this.bus, rootRunId));
    if (over) throw new AgentError("GLOBAL_CAP", over.message, { details: { budget: over.budget } });
  }

  private async check(depth: number): Promise<void> {
    const killSwitch = await readKillSwitch(this.bus.buckets.pool);
    if (killSwitch?.active) {
      throw new AgentError(
        "KILL_SWITCH_ACTIVE",
        `kill switch is on (${killSwitch.reason}, by ${killSwitch.by}): no runs are admitted`,
      );
    }
    if (depth > this.limits.maxDepth) {
      throw new AgentError(
        "DEPTH_LIMIT",
        `depth limit: a child at depth ${depth} exceeds the cluster's maximum depth ${this.limits.maxDepth}`,
      );
    }
  }

  /**
   * Finishes the admission of a run submitted again while it is still queued, when no job of it is
   * on the work queue: a supervisor stopped (killed, say) after taking the run's slot and before
   * queuing its job, and the run would otherwise stay queued, holding its slot, for ever (a submit
   * retried after a lost reply finds it "existing"). A run whose job waits, or is held, is left as it
   * is. True when this call admitted the run (wrote its status).
   */
  private async finishAdmission(
    request: SubmitRequest,
    ids: AdmittedIds,
    revision?: number,
  ): Promise<boolean> {
    if (await hasQueuedJob(this.bus, ids.runId)) return false;
    this.bus.logger.warn(
      { runId: ids.runId },
      "a queued run has no job (its admission stopped midway): queuing it now",
    );
    // Its `run.admitted` when the admission got that far: the run's only event since it was queued.
    const admitted = await lastAuditEvent(this.bus, ids.runId, "run.admitted");
    return await this.admit(request, ids, { recorded: admitted?.event.seq ?? 0, revision });
  }

  /**
   * Records the run as queued, audits its admission, gives a root run's tree its cap (see
   * TreeCap) and queues its first job; false, doing nothing else, when the status was written
   * meanwhile (see below). `recorded`: the seq of the run's `run.admitted` when an interrupted
   * admission being finished got that far, which the job continues from instead of auditing it
   * again.
   *
   * The status is created, or for an admission being finished written over the revision read
   * (`revision`), never put: a copy of the submit that read no status (or a queued one) could
   * otherwise write "queued" over the status its run has since (running, parked, committed).
   */
  private async admit(
    request: SubmitRequest,
    ids: AdmittedIds,
    o: { recorded?: number; revision?: number | undefined } = {},
  ): Promise<boolean> {
    const { parent, ...rest } = request;
    const spec: RunSpec = { ...rest, runId: ids.runId };
    const now = this.bus.clock.now();
    const status: RunStatus = {
      runId: ids.runId,
      rootRunId: ids.rootRunId,
      ...(parent ? { parentRunId: parent.runId } : {}),
      depth: ids.depth,
      status: "queued",
      phase: "PLAN",
      iteration: 0,
      usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 0, toolCalls: 0 },
      // Only a named root run's spec is compared (see specConflict): an id minted here has no copies.
      ...(ids.named && !parent ? { specHash: ids.specHash } : {}),
      updatedAt: toRfc3339(now),
    };
    const written =
      o.revision === undefined
        ? await this.status.create(status)
        : await this.status.update(status, o.revision);
    if (!written) return false;
    const recorded = o.recorded ?? 0;
    // The run's first log message and a root's cap are written at once; both before the job, whose
    // worker reads the cap before the run's first model call. Both settle before a failure is
    // thrown, so a retried submit never races a write still in flight.
    const [first, cap] = await Promise.allSettled([
      recorded > 0
        ? recorded
        : recordAdmitted(
            this.bus,
            { ...ids, parentRunId: parent?.runId },
            { depth: ids.depth, agent: spec.agent.name, specHash: ids.specHash },
          ),
      parent
        ? undefined
        : openTree(this.bus.buckets.pool, ids.runId, this.limits.treeIterationCap, treeSpendOf(spec)),
    ]);
    if (first.status === "rejected") throw first.reason;
    if (cap.status === "rejected") throw cap.reason;
    const seq = first.value;
    const job: RunJob = {
      schemaVersion: 1,
      runId: ids.runId,
      rootRunId: ids.rootRunId,
      ...(parent ? { parentRunId: parent.runId } : {}),
      depth: ids.depth,
      spec,
      auditSeq: seq,
    };
    await publishJob(this.bus, job, `${ids.runId}:start`);
    this.bus.logger.info({ runId: ids.runId, depth: ids.depth }, "run admitted");
    if (parent) await this.cancelIfOrphaned(parent.runId, ids.runId);
    return true;
  }

  /**
   * A parent can begin to fail after checkParent read it and before the child had a status, and
   * what cancels its children then may have read them without finding this one: the undo of a
   * parent this build started, which cancels its children still going before it reads which
   * committed (it writes the parent's FAIL status first, see awaitChildrenEnd), or the supervisor's
   * pass on its `run.failed` (cancelOrphans, once the parent's status says it failed: see statusCaughtUp).
   * Read again now that the child's status is written, the parent tells: either that read found the
   * child, or this one finds the parent failing and cancels the child, with the message id of the
   * other's cancel (nothing is queued twice).
   */
  private async cancelIfOrphaned(parentRunId: string, runId: string): Promise<void> {
    const parent = await this.status.get(parentRunId);
    if (parent?.status !== "failed" && parent?.phase !== "FAIL") return;
    const why = parent.status === "failed" ? parent.terminal?.reason : undefined;
    const cancelled = await cancelOrphans(this.bus, parentRunId, why, parent.status !== "failed");
    if (cancelled.length === 0) return;
    this.metrics?.orphansCancelled.inc(cancelled.length);
    this.bus.logger.warn(
      { runId, parentRunId, children: cancelled },
      "child admitted as its parent failed: cancelled with it",
    );
  }
}

/** A run being admitted: who it is, where in its tree, and the hash of the spec it was asked with. */
interface AdmittedIds {
  runId: string;
  rootRunId: string;
  depth: number;
  named: boolean;
  specHash: string;
}

/** What `run.admitted` keeps that a later submit of the same run is compared with. */
const AdmittedData = z.object({ specHash: z.string().optional() });
