import type { Consumer, JsMsg } from "@nats-io/jetstream";
import type { Subscription } from "@nats-io/transport-node";
import { RunJob } from "../../shared/contracts/cluster.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { whenLinked } from "../../shared/bus/link.js";
import { remoteCritic } from "../../shared/bus/critic-client.js";
import { KillSwitchView } from "../../shared/bus/kill-switch.js";
import { KvMemory, memoryReads } from "../../shared/bus/kv-memory.js";
import { describeRemoteTool, remoteTool } from "../../shared/bus/remote-tool.js";
import type { ServiceWait } from "../../shared/bus/request.js";
import { actorModelDriver } from "../../shared/bus/model-actor.js";
import { EffectPerformer } from "../../shared/loop/performer.js";
import type { RedactionConfig } from "../../shared/contracts/redaction.js";
import type { RegisteredPolicies } from "../../shared/loop/policy.js";
import { toAgentError } from "../../shared/runtime/errors.js";
import { fanOutSpawnTool } from "../../shared/tools/builtin/spawn.js";
import type { AnyTool } from "../../shared/tools/tool.js";
import type { IdGenerator } from "../../shared/runtime/ids.js";
import type { ActorMetrics } from "../../shared/runtime/metrics.js";
import { ToolRegistry } from "../../shared/tools/registry.js";
import { RunLease } from "./drive.js";
import type { LeaseOutcome } from "./lease-deps.js";
import { FanOutHandler } from "./fanout.js";
import type { BreakerSettings } from "../../shared/models/breaker-policy.js";
import { ModelBreakers } from "../../shared/bus/model-breakers.js";
import { sharedDescriptors } from "../../shared/bus/tool-descriptors.js";
import { leftWaitingOn } from "./breaker-wait.js";
import { logLeaseFailure, retryDelay } from "./lease-failure.js";
import { IterationLeases } from "./leases.js";
import { TreeSpend } from "./spend.js";
import { ToolCatalog } from "./tool-catalog.js";
import { bindJobIntake, pullJobs } from "./job-intake.js";
import { ackSubjectOf, WorkerBeats } from "./beat.js";
import { answerHolds, stillHeldBy } from "./holder.js";
import { storageFull } from "../../shared/bus/storage-full.js";
import { leaseWriterId } from "./writer-id.js";
import { LeaseRedaction } from "./redaction.js";
import { Reconciler } from "./reconcile.js";
import { localTools, registerRunTools } from "./local-tools.js";
import { RunTrace } from "./run-trace.js";
import type { PriceTable } from "../../shared/models/pricing.js";

/** How many times a run's job is renewed (`working()`) per ack wait. */
export const RENEWALS_PER_ACK_WAIT = 3;

export interface WorkerOptions {
  workerId: string;
  ackWaitMs: number;
  /** See AGENT_BEAT_MS. */
  beatMs: number;
  /** Runs this worker drives at once. */
  concurrency: number;
  checkpointEvery: number;
  /** The most iterations of the run tree's budget one reservation asks for (AGENT_ITERATION_LEASE). */
  iterationLease: number;
  /** See AGENT_TOOL_DESCRIBE_TTL_MS. */
  toolDescribeTtlMs: number;
  /** See AGENT_TOOL_OUTAGE_MS. */
  toolOutageMs: number;
  /** See AGENT_SERVICE_WAIT_MS (0 when absent). */
  serviceWaitMs?: number;
  /** See AGENT_LOCAL_TOOLS (absent: none, every tool is asked of its service). */
  localTools?: readonly string[];
  /** This worker's credential files, which its in-process file tools refuse (see secretFilesOf). */
  secretFiles?: readonly string[];
  /** See MEMORY_RECALL_WINDOW (absent or 0: a recall reads every memory of its agent). */
  memoryRecallWindow?: number;
  /** How long a FENCED or failing job waits before it is offered again. */
  retryDelayMs: number;
  /** See AGENT_MODEL_OUTAGE_MS (0 when absent: a model outage fails the run at once). */
  modelOutageMs?: number;
  /** See AGENT_CHILDREN_END_WAIT_MS (absent: CHILDREN_END_WAIT_MS). */
  childrenEndWaitMs?: number;
  /** See AGENT_CANCEL_SETTLE_WAIT_MS (absent: CANCEL_SETTLE_WAIT_MS). */
  cancelSettleWaitMs?: number;
  /** See AGENT_MODEL_BREAKER_FAILURES and _COOLDOWN_MS (absent: no breaker). */
  modelBreaker?: BreakerSettings;
  /**
   * Convergence policies a RunSpec may name besides the built-in ones (see registerPolicies): the
   * worker announces their names in its beats. Absent: none.
   */
  policies?: RegisteredPolicies;
  env: Readonly<Record<string, string | undefined>>;
  /** Prices of the models runs name (MODEL_PRICES, MODEL_PRICES_FILE); absent: none, every call costs 0. */
  prices?: PriceTable;
  /** The operators' redaction rules (AGENT_REDACT_FILE); absent: only the tools' own. */
  redaction?: RedactionConfig;
  metrics: ActorMetrics;
}

/**
 * An agent worker: pulls jobs from the shared durable consumer on the work queue and drives each
 * run for as long as it holds the job. Any number of workers may share the consumer; JetStream
 * gives each job to one of them, and to another once the holder stops renewing its ack wait (a
 * crash, a lost connection). A worker that drains hands its jobs back at once.
 */
export class AgentWorker {
  private readonly inFlight = new Set<Promise<void>>();
  /** The jobs held now, by ack subject, each with its stream sequence: the beats name them. */
  private readonly held = new Map<string, number>();
  private beats!: WorkerBeats;
  private holds: Subscription | undefined;
  private readonly drain = new AbortController();
  private readonly killSwitch = new KillSwitchView();
  private leasesOf!: IterationLeases;
  private spendOf!: TreeSpend;
  private tools!: ToolCatalog;
  private fanOut!: FanOutHandler;
  private readonly spawnTool = fanOutSpawnTool();
  private consumer!: Consumer;
  private loop: Promise<void> | undefined;
  private leases = 0;
  /** One store for every run: a recall window remembers where each agent's last recall began. */
  private readonly memory: KvMemory;
  /** The built-in tools this worker runs in-process (AGENT_LOCAL_TOOLS), shared by every run. */
  private readonly local: ReadonlyMap<string, AnyTool>;
  private readonly breakers: ModelBreakers;

  constructor(
    private readonly bus: ActorBus,
    private readonly options: WorkerOptions,
    private readonly ids: IdGenerator,
  ) {
    this.memory = new KvMemory(bus.buckets.memory, bus.clock, memoryReads(bus, options.memoryRecallWindow));
    this.local = localTools(options.localTools ?? [], {
      memory: this.memory,
      ...(options.secretFiles ? { secretFiles: options.secretFiles } : {}),
    });
    this.breakers = new ModelBreakers(
      bus.buckets.modelBreakers,
      options.modelBreaker ?? { failures: 0, cooldownMs: 1 },
      { clock: bus.clock, logger: bus.logger, workerId: options.workerId, metrics: options.metrics },
    );
  }

  async start(): Promise<void> {
    const { consumer } = await bindJobIntake(this.bus, this.options.ackWaitMs, {
      killSwitch: this.killSwitch,
      breakers: this.breakers,
    });
    this.consumer = consumer;
    this.leasesOf = new IterationLeases(this.bus, this.options.iterationLease);
    const leases = this.leasesOf;
    this.spendOf = new TreeSpend(this.bus, (rootRunId) => leases.budget(rootRunId));
    this.tools = new ToolCatalog(
      (name) => describeRemoteTool(name, { ...this.bus, wait: this.serviceWait(`tool:${name}`) }),
      this.bus.clock,
      { ttlMs: this.options.toolDescribeTtlMs, outageMs: this.options.toolOutageMs },
      this.bus.logger,
      sharedDescriptors(this.bus.buckets.toolDescriptors),
    );
    this.fanOut = new FanOutHandler(this.bus, this.serviceWait("supervisor"));
    this.beats = new WorkerBeats(
      this.bus,
      {
        workerId: this.options.workerId,
        instance: `${this.options.workerId}-${this.ids.next("i").slice(-8)}`,
        beatMs: this.options.beatMs,
        policies: [...(this.options.policies?.keys() ?? [])].sort(),
      },
      () => [...this.held.keys()],
    );
    this.beats.start();
    this.holds = answerHolds(this.bus, this.options.workerId, () => this.held);
    this.loop = this.pull();
  }

  get draining(): boolean {
    return this.drain.signal.aborted;
  }

  /** Stops pulling, lets each run finish its current step, hands the jobs back at once. */
  async stop(): Promise<void> {
    this.drain.abort();
    await this.loop;
    await Promise.all(this.inFlight);
    this.beats.stop();
    this.holds?.unsubscribe();
    this.killSwitch.stop();
    this.breakers.stop();
  }

  private async pull(): Promise<void> {
    await pullJobs(this.consumer, {
      clock: this.bus.clock,
      logger: this.bus.logger,
      signal: this.drain.signal,
      room: () => this.options.concurrency - this.inFlight.size,
      whenRoom: () => Promise.race(this.inFlight),
      take: (msg) => this.take(msg),
    });
  }

  /** A job the pull brought: driven from now on; handed back at once when draining. */
  private take(msg: JsMsg): void {
    if (this.drain.signal.aborted) {
      this.handBack(msg);
      return;
    }
    const held = ackSubjectOf(msg);
    if (held) this.held.set(held, msg.info.streamSequence);
    const task = this.handle(msg).finally(() => {
      this.inFlight.delete(task);
      if (held) this.held.delete(held);
    });
    this.inFlight.add(task);
  }

  private async handle(msg: JsMsg): Promise<void> {
    let job: RunJob;
    try {
      job = decode(RunJob, msg.data);
    } catch (err) {
      // A job nobody can read will never become readable: drop it, loudly.
      this.bus.logger.error({ err, subject: msg.subject }, "unreadable job dropped");
      msg.term();
      return;
    }
    const log = this.bus.logger.child({ runId: job.runId });
    if (msg.redelivered) this.options.metrics.redeliveries.inc();
    let outcome: LeaseOutcome;
    try {
      outcome = await this.lease(job, msg).run();
    } catch (err) {
      // A write the lease made outside withBusRetry (a fan-out's record, say) refused for room.
      const error = storageFull(`run ${job.runId}`, err) ?? toAgentError(err);
      const delayMs = retryDelay(
        error,
        msg.info.deliveryCount,
        this.options.retryDelayMs,
        this.bus.clock.now(),
        this.bus.random,
      );
      const provider = leftWaitingOn(error);
      if (error.code === "RUN_NOT_STARTED") {
        // Not a failed lease either: an operator's halt or cancel waiting for its run to start (see waitForStart).
        const event = (error.details as { event?: string } | undefined)?.event ?? "halt";
        log.info({ delayMs }, `${event} handed back: its run has not started yet`);
      } else if (error.code === "CHILDREN_GOING") {
        // Not a failed lease: the run waits for the children it cancelled (see awaitChildrenEnd).
        log.info({ delayMs, reason: error.message }, "run handed back: it waits for its children to end");
      } else if (provider === undefined) {
        this.options.metrics.leaseFailures.inc({ code: error.code });
        logLeaseFailure(log, error, msg.info.deliveryCount, delayMs);
      } else {
        // Not a failed lease: nothing was tried. Said once per run, when it was handed back.
        this.options.metrics.runsLeftWaiting.inc({ provider });
        log.debug({ provider, delayMs }, "run left queued: its provider's breaker is still open");
      }
      this.defer(msg, delayMs);
      return;
    }
    switch (outcome) {
      case "done":
        whenLinked(this.bus.nc, () => msg.ack());
        break;
      case "unstartable":
        // A job that can never start a run stays so however often it is retried.
        whenLinked(this.bus.nc, () => msg.term());
        break;
      case "release":
        log.info("handing the run back to the queue");
        this.handBack(msg);
        break;
      case "fenced":
        // Another delivery of this job drives the run (this worker was late renewing it): an ack
        // or a NAK from here would settle the job under that worker, so it is left alone.
        break;
      case "superseded":
        // Another job of the run drives it: this one is done with, but for an outside event it
        // carries (a halt, a decision), which goes back to be applied or found stale.
        log.info({ event: job.event?.type }, "another job of the run drives it: this one is settled");
        if (job.event) this.handBack(msg);
        else whenLinked(this.bus.nc, () => msg.ack());
        break;
    }
  }

  /** Hands a job back to be offered at once (a drain, a run released); a draining connection sends it before closing. */
  private handBack(msg: JsMsg): void {
    whenLinked(this.bus.nc, () => msg.nak());
  }

  /**
   * Hands a job back to be offered again in `delayMs`. Like every settlement of a job here, it
   * waits for the connection: a NAK the client dropped while it reconnected left the job to the
   * ack wait (a lease failed in a JetStream outage longer than the writes' retries, say).
   */
  private defer(msg: JsMsg, delayMs: number): void {
    whenLinked(this.bus.nc, () => msg.nak(delayMs));
  }

  /** How a request to a service nobody serves yet waits for one (AGENT_SERVICE_WAIT_MS). */
  private serviceWait(service: string, runId?: string): ServiceWait | undefined {
    const waitMs = this.options.serviceWaitMs ?? 0;
    if (waitMs <= 0) return undefined;
    const { clock, random } = this.bus;
    return { waitMs, clock, random, onWait: () => this.waitingFor(service, runId) };
  }

  /** A wait for a service, counted and logged as it begins, with the run it is for. */
  private waitingFor(service: string, runId?: string): void {
    this.options.metrics.serviceWaits.inc({ service });
    this.bus.logger.warn(
      { ...(runId ? { runId } : {}), service, waitMs: this.options.serviceWaitMs },
      "nobody serves it yet: waiting for a service",
    );
  }

  private lease(job: RunJob, msg: JsMsg): RunLease {
    const bus = this.bus;
    const registry = new ToolRegistry();
    this.leases += 1;
    const jobSeq = msg.info.streamSequence;
    const writerId = leaseWriterId(this.options.workerId, this.leases, this.ids.next("w").slice(-8), jobSeq);
    const redaction = LeaseRedaction.ofRun(this.options.redaction, bus, job.runId);
    const trace = RunTrace.of(bus.subjects.prefix, job, msg.headers);
    const performer = new EffectPerformer({
      registry,
      toolInput: (effect, state) => redaction.input(effect, state),
      clock: bus.clock,
      random: bus.random,
      env: this.options.env,
      ...(this.options.prices ? { prices: this.options.prices } : {}),
      memory: this.memory,
      criticFor: (state) => remoteCritic({ ...bus, wait: this.serviceWait("critic", job.runId) }, state),
      actorModel: (ref) =>
        actorModelDriver(ref, { ...bus, wait: this.serviceWait(`model:${ref.name}`, job.runId) }),
      guardDriver: (driver) => this.breakers.guard(driver),
      invokePolicy: { serviceWaitMs: this.options.serviceWaitMs ?? 0 },
      onServiceWait: (tool) => this.waitingFor(`tool:${tool}`, job.runId),
      ...(trace ? { spans: trace } : {}),
    });
    return new RunLease(
      {
        bus,
        checkpointEvery: this.options.checkpointEvery,
        policies: this.options.policies ?? new Map(),
        // Asked twice by a lease that asked early and then found the run started (see open).
        discover: async (names, fresh) => {
          await registerRunTools(registry, names, {
            local: this.local,
            describe: (remote) => this.tools.lookup(remote, fresh),
            remote: (descriptor) => remoteTool(descriptor, bus),
            spawn: this.spawnTool,
          });
          return registry.descriptors();
        },
        localTool: (name) => this.local.has(name),
        performer,
        redaction,
        reconciler: new Reconciler({
          idempotency: bus.buckets.idempotency,
          clock: bus.clock,
          random: bus.random,
          logger: bus.logger.child({ runId: job.runId }),
          tool: (name) => registry.get(name),
        }),
        killSwitch: this.killSwitch,
        leases: this.leasesOf.forRun(job),
        spend: this.spendOf.forRun(job),
        fanOut: this.fanOut,
        workerId: this.options.workerId,
        writerId,
        jobSeq,
        heldElsewhere: (writer) => {
          const except = ackSubjectOf(msg);
          if (!except) return Promise.resolve(false);
          // Past the ack wait an answer comes too late to matter: the job would be offered again.
          return stillHeldBy(bus, writer, { jobSeq, except }, this.options.ackWaitMs);
        },
        deliveryCount: msg.info.deliveryCount,
        retryDelay: (error) =>
          retryDelay(error, msg.info.deliveryCount, this.options.retryDelayMs, bus.clock.now()),
        logger: bus.logger,
        metrics: this.options.metrics,
        heartbeat: () => msg.working(),
        // Several renewals per ack wait: a busy event loop may delay one or two without the job
        // going to another worker (and if it does, the WAL's fencing stops one of the two).
        heartbeatMs: Math.max(100, Math.floor(this.options.ackWaitMs / RENEWALS_PER_ACK_WAIT)),
        modelOutageMs: this.options.modelOutageMs ?? 0,
        ...(this.options.childrenEndWaitMs === undefined
          ? {}
          : { childrenEndWaitMs: this.options.childrenEndWaitMs }),
        ...(this.options.cancelSettleWaitMs === undefined
          ? {}
          : { cancelSettleWaitMs: this.options.cancelSettleWaitMs }),
        breakerOf: (provider) => this.breakers.breakerOf(provider),
        serviceWait: (tool) => this.serviceWait(`tool:${tool}`, job.runId),
        stopping: this.drain.signal,
        ...(trace ? { trace } : {}),
      },
      job,
    );
  }
}
