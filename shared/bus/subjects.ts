import { DEFAULT_PREFIX } from "../runtime/config.js";
import { AgentError } from "../runtime/errors.js";

/**
 * The one place that knows the subject grammar (DESIGN.md §3). Every token is validated, so a
 * runId or tool name can never smuggle a `.`, `*` or `>` into a subject and widen what it matches.
 */
const TOKEN = /^[A-Za-z0-9_-]{1,64}$/;
/** Audit kinds are dotted (`tool.intent`): each part is a token. */
const DOTTED = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;

export { DEFAULT_PREFIX };

function token(kind: string, value: string): string {
  if (!TOKEN.test(value)) {
    throw new AgentError(
      "INVALID_INPUT",
      `${kind} '${value}' is not a valid subject token ([A-Za-z0-9_-]{1,64})`,
    );
  }
  return value;
}

/** The stream a KV bucket keeps its entries in (what stream info, purge and direct reads name). */
export function bucketStream(bucket: string): string {
  return `KV_${bucket}`;
}

/**
 * The subject a KV bucket stores `key` on (what its client publishes a put or a create to); with
 * `>` the filter of every key, with "" the prefix they share.
 */
export function kvSubject(bucket: string, key: string): string {
  return `$KV.${bucket}.${key}`;
}

/** A stream of this prefix, and whether it is one of the streams or a bucket's. */
export interface StoreName {
  name: string;
  kind: "stream" | "bucket";
}

export interface StreamNames {
  runs: string;
  /** The run log: every run's write-ahead records and audit events (DESIGN.md §3). */
  log: string;
  /** Run trees' counters (`allow_msg_counter`): what each tree's runs used of its caps. */
  counters: string;
}

/** What a run tree counts. */
export type TreeCounter = "iterations" | "tokens" | "costMicroUsd";

export interface BucketNames {
  runs: string;
  pool: string;
  idempotency: string;
  memory: string;
  /** Durable state of tool services (a service keys its entries by its own name). */
  toolState: string;
  /** The model providers' breakers the agent workers share (see ModelBreaker). */
  modelBreakers: string;
  /** The tools' descriptors as their services last gave them, shared by the agent workers (see ToolCatalog). */
  toolDescriptors: string;
  /** The tool inputs redaction kept out of the run log, for the worker that sends the call (see RedactedInputs). */
  redactedInputs: string;
}

export class Subjects {
  readonly prefix: string;

  constructor(prefix: string = DEFAULT_PREFIX) {
    this.prefix = token("prefix", prefix);
  }

  runsSubmit(): string {
    return `${this.prefix}.runs.submit`;
  }

  runQueue(runId: string): string {
    return `${this.prefix}.runs.queue.${token("runId", runId)}`;
  }

  runQueueAll(): string {
    return `${this.prefix}.runs.queue.>`;
  }

  /**
   * One message of a run's log: `<kind>` is its headline event (`run.committed`, `approval.requested`,
   * … or `step`), so a subscriber filters by it (see headlineOf).
   */
  log(runId: string, kind: string): string {
    if (!DOTTED.test(kind))
      throw new AgentError("INVALID_INPUT", `log kind '${kind}' is not a dotted lowercase name`);
    return `${this.prefix}.log.${token("runId", runId)}.${kind}`;
  }

  /** Every run's log, or one run's when `runId` is given: the fence's subject for that run. */
  logAll(runId?: string): string {
    return runId === undefined ? `${this.prefix}.log.>` : `${this.prefix}.log.${token("runId", runId)}.>`;
  }

  /** The messages of every run whose headline is a run lifecycle event (`run.admitted`, `run.committed`…). */
  logLifecycle(): string {
    return `${this.prefix}.log.*.run.*`;
  }

  /** A refused submit's record: outside the run's log, so the refused run id may be submitted again. */
  rejected(runId: string): string {
    return `${this.prefix}.rejected.${token("runId", runId)}`;
  }

  rejectedAll(): string {
    return `${this.prefix}.rejected.>`;
  }

  /**
   * One counter of a run tree (a JetStream counter: publishes with `Nats-Incr` add to it), e.g.
   * the model calls its runs reserved against its cap.
   */
  treeCounter(rootRunId: string, what: TreeCounter): string {
    return `${this.prefix}.counters.${token("rootRunId", rootRunId)}.${token("counter", what)}`;
  }

  /** Every counter of one run tree (iterations, tokens, cost). */
  treeCounters(rootRunId: string): string {
    return `${this.prefix}.counters.${token("rootRunId", rootRunId)}.*`;
  }

  countersAll(): string {
    return `${this.prefix}.counters.>`;
  }

  tool(name: string): string {
    return `${this.prefix}.tools.${token("tool name", name)}`;
  }

  /** Where a tool service answers with its descriptor (how workers discover tools in any language). */
  toolDescribe(name: string): string {
    return `${this.tool(name)}.describe`;
  }

  /**
   * Where a tool service settles a call a halted run was waiting on (see tool-settle.ts): its record
   * for the call's key is read, or written as a cancel or a human says.
   */
  toolSettle(name: string): string {
    return `${this.tool(name)}.settle`;
  }

  /** Where a model actor (ModelRef provider `actor`) answers model requests. */
  model(name: string): string {
    return `${this.prefix}.models.${token("model name", name)}`;
  }

  criticReview(): string {
    return `${this.prefix}.critic.review`;
  }

  /** The critics' roll call (agentctl cluster): every replica answers with a CriticHello. */
  criticPing(): string {
    return `${this.prefix}.critic.ping`;
  }

  approvals(runId: string): string {
    return `${this.prefix}.approvals.${token("runId", runId)}`;
  }

  /** Every run's approval subject, for the supervisor's subscription. */
  approvalsAll(): string {
    return `${this.prefix}.approvals.*`;
  }

  /** The runId an approval subject names; INVALID_INPUT for anything else. */
  runIdOfApproval(subject: string): string {
    const head = `${this.prefix}.approvals.`;
    if (!subject.startsWith(head))
      throw new AgentError("INVALID_INPUT", `'${subject}' is not an approval subject`);
    return token("runId", subject.slice(head.length));
  }

  /** Where an operator halts one run (see HaltRequest). */
  halt(): string {
    return `${this.prefix}.control.halt`;
  }

  /** Where an operator ends a halted run for good (see CancelRequest). */
  cancel(): string {
    return `${this.prefix}.control.cancel`;
  }

  /** Where an operator resumes a halted run (after the kill switch, or a reconciliation). */
  resume(): string {
    return `${this.prefix}.control.resume`;
  }

  /** Where a live agent worker instance says so (see WorkerBeat). */
  workerBeat(instance: string): string {
    return `${this.prefix}.workers.beat.${token("worker instance", instance)}`;
  }

  workerBeatAll(): string {
    return `${this.prefix}.workers.beat.*`;
  }

  /** Where a worker answers whether it still holds a job (see HoldsQuery). */
  workerHolds(workerId: string): string {
    return `${this.prefix}.workers.holds.${token("worker id", workerId)}`;
  }

  /** Where every supervisor answers a roll call with its settings (see SupervisorHello). */
  supervisorPing(): string {
    return `${this.prefix}.control.ping`;
  }

  killSwitch(): string {
    return `${this.prefix}.control.killswitch`;
  }

  /** Stream names: upper-cased prefix, so a second prefix on one server gets its own streams. */
  streams(): StreamNames {
    const p = this.prefix === DEFAULT_PREFIX ? "AGENT" : `${this.prefix.toUpperCase().replaceAll("-", "_")}`;
    return { runs: `${p}_RUNS`, log: `${p}_LOG`, counters: `${p}_COUNTERS` };
  }

  buckets(): BucketNames {
    const p = this.prefix;
    return {
      runs: `${p}-runs`,
      pool: `${p}-pool`,
      idempotency: `${p}-idempotency`,
      memory: `${p}-memory`,
      toolState: `${p}-tool-state`,
      modelBreakers: `${p}-model-breakers`,
      toolDescriptors: `${p}-tool-descriptors`,
      redactedInputs: `${p}-redacted-inputs`,
    };
  }

  /** Every bucket's name (Object.values of the interface above is typed `any[]`). */
  bucketList(): string[] {
    const b = this.buckets();
    return [
      b.runs,
      b.pool,
      b.idempotency,
      b.memory,
      b.toolState,
      b.modelBreakers,
      b.toolDescriptors,
      b.redactedInputs,
    ];
  }

  /** Every stream this prefix has: the streams, then each bucket's (see bucketStream). */
  stores(): StoreName[] {
    const s = this.streams();
    return [
      ...[s.runs, s.log, s.counters].map((name): StoreName => ({ name, kind: "stream" })),
      ...this.bucketList().map((bucket): StoreName => ({ name: bucketStream(bucket), kind: "bucket" })),
    ];
  }

  /** The names of stores(). */
  storeStreams(): string[] {
    return this.stores().map((store) => store.name);
  }
}
