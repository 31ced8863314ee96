import { z } from "zod";
import { CancelRequest, ControlReply, HaltRequest, ResumeRequest } from "../../shared/contracts/cluster.js";
import { Approval, DecidedBy, KillSwitch, type SubmitReply } from "../../shared/contracts/control.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { auditCount, auditTally, lastAuditEvent, readAudit } from "../../shared/bus/audit.js";
import { requestJson, type ServiceWait } from "../../shared/bus/request.js";
import { askUntilDecided } from "../../shared/bus/decided.js";
import { parseSubmitRequest, submitRun } from "../../shared/bus/submit.js";
import { followRun, statusWithProgress } from "../../shared/bus/run-progress.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { AgentError, fromErrorPayload } from "../../shared/runtime/errors.js";

const REQUEST_TIMEOUT_MS = 10_000;
/** How long a request asked again waits for the first copy's event in the run's trail (see inTrailSince). */
const FIRST_EVENT_WAIT_MS = 3_000;
/** What `run.resumed` says of an operator's resume. */
const ResumedData = z.object({ by: z.string() });
const SETTLED = new Set(["committed", "failed", "halted", "awaiting_approval"]);
const CLOSING: Record<string, AuditEvent["kind"]> = {
  committed: "run.committed",
  failed: "run.failed",
  halted: "run.halted",
  awaiting_approval: "approval.requested",
};

/** What agentctl does, as functions over a connected bus (the CLI and `npm start` share them). */
export class ClusterClient {
  readonly status: RunStatusStore;

  constructor(
    readonly bus: ActorBus,
    /** Waits for a supervisor when none answers yet (one restarting) instead of failing at once. */
    private readonly wait?: ServiceWait,
  ) {
    this.status = new RunStatusStore(bus.buckets.runs);
  }

  async submit(spec: unknown): Promise<Extract<SubmitReply, { ok: true }>> {
    // A named run's submit is asked again when its outcome is not known (see submitRun).
    const reply = await submitRun(this.bus, parseSubmitRequest(spec), this.wait, spec);
    if (!reply.ok) throw fromErrorPayload(reply.error);
    return reply;
  }

  /** A decision on the run as read now: see askAsRead. */
  async decide(runId: string, approval: Approval): Promise<string> {
    return this.askAsRead(
      runId,
      (revision) => ({
        subject: this.bus.subjects.approvals(runId),
        schema: Approval,
        value: revision === undefined ? approval : { ...approval, revision },
      }),
      {
        kind: "approval.decided",
        ours: (data) => {
          const decided = DecidedBy.safeParse(data).data;
          return decided?.decision === approval.decision && decided.by === approval.by;
        },
        told: `run ${runId}: ${approval.decision} recorded (the reply was lost, and the supervisor, asked again, found the run moved on by this decision)`,
      },
    );
  }

  async halt(request: HaltRequest): Promise<string> {
    return this.stop(this.bus.subjects.halt(), HaltRequest, request, "halt", (s) =>
      s.status === "halted" ? "halted" : undefined,
    );
  }

  /**
   * One run's resume, on the run as read now (see askAsRead). A tree's is asked once: its runs are
   * read by the supervisor, and a second copy, sent after the first went through, could resume
   * runs of it halted again since.
   */
  async resume(request: ResumeRequest): Promise<string> {
    const subject = this.bus.subjects.resume();
    if (request.tree) {
      const { reply } = await this.ask(subject, ResumeRequest, request, false);
      if (!reply.ok) throw fromErrorPayload(reply.error);
      return reply.message;
    }
    return this.askAsRead(
      request.runId,
      (revision) => ({
        subject,
        schema: ResumeRequest,
        value: revision === undefined ? request : { ...request, revision },
      }),
      {
        kind: "run.resumed",
        ours: (data) => ResumedData.safeParse(data).data?.by === request.by,
        told: `run ${request.runId}: resume queued (the reply was lost, and the supervisor, asked again, found the run resumed by this request)`,
      },
    );
  }

  async cancel(request: CancelRequest): Promise<string> {
    return this.stop(this.bus.subjects.cancel(), CancelRequest, request, "cancel", (s) => {
      if (s.status === "failed") return `failed (${s.terminal?.reason ?? "no reason recorded"})`;
      return s.phase === "FAIL" ? "undoing its completed tool calls before it fails" : undefined;
    });
  }

  /** Setting the switch twice sets it once: asked again when its outcome is not known. */
  async killSwitch(request: KillSwitch): Promise<string> {
    const { reply } = await this.ask(this.bus.subjects.killSwitch(), KillSwitch, request, true);
    if (!reply.ok) throw fromErrorPayload(reply.error);
    return reply.message;
  }

  /**
   * The run's status; undefined for a run never submitted (or not yet). A run that finished and
   * whose status retention removed (its audit trail says it finished) is NOT_FOUND, saying so.
   */
  async statusOf(runId: string): Promise<RunStatus | undefined> {
    const status = await statusWithProgress(this.bus, runId);
    if (status || !(await auditTally(this.bus, runId)).finished) return status;
    throw new AgentError(
      "NOT_FOUND",
      `run '${runId}' finished, and its status was removed after the cluster's retention (SUPERVISOR_STATUS_RETAIN_MS); \`agentctl audit tail ${runId}\` shows what it did`,
    );
  }

  /**
   * One run's status, with its progress (see followRun), at each change until it settles
   * (terminal, halted or waiting for a human).
   */
  async *follow(runId: string, signal?: AbortSignal): AsyncGenerator<RunStatus> {
    for await (const status of followRun(this.bus, runId, signal)) {
      yield status;
      if (SETTLED.has(status.status)) return;
    }
  }

  /**
   * A run's audit events. A settled run's closing event is in its log before its status changes;
   * a status written by hand ahead of its log is waited on (up to `waitMs`) for its closing event.
   */
  async audit(runId: string, waitMs = 5_000): Promise<AuditEvent[]> {
    const closing = CLOSING[(await this.status.get(runId))?.status ?? ""];
    const deadline = this.bus.clock.now() + waitMs;
    for (;;) {
      const events: AuditEvent[] = [];
      for await (const event of readAudit(this.bus, { runId })) events.push(event);
      const done = !closing || events.at(-1)?.kind === closing;
      if (done || this.bus.clock.now() >= deadline) return events;
      await this.bus.clock.sleep(50);
    }
  }

  /**
   * A request on the run as read now (a decision, a resume): it names the revision of the status
   * read, so the supervisor refuses it (RUN_CHANGED) once the run has changed, and a copy of it is
   * asked again safely when its outcome is not known: it can never act on a later state of the run
   * (a later approval request, a later halt). A copy refused because the first one moved the run
   * on finds the first one's event in the run's trail, after the events it had when read, and is
   * told as done.
   */
  private async askAsRead<S extends z.ZodType>(
    runId: string,
    request: (revision: number | undefined) => { subject: string; schema: S; value: z.input<S> },
    first: { kind: AuditEvent["kind"]; ours: (data: unknown) => boolean; told: string },
  ): Promise<string> {
    const read = await this.status.read(runId);
    const held = read ? await auditCount(this.bus, runId) : 0;
    const { subject, schema, value } = request(read?.revision);
    const { reply, resent } = await this.ask(subject, schema, value, true);
    if (reply.ok) return reply.message;
    if (resent && reply.error.code === "RUN_CHANGED" && (await this.inTrailSince(runId, held, first))) {
      return first.told;
    }
    throw fromErrorPayload(reply.error);
  }

  /**
   * Whether the run's latest `kind` event came after its first `held` events and is `ours`: a
   * decision or a resume reaches the run's log once a worker takes its job, so it is waited for a moment.
   */
  private async inTrailSince(
    runId: string,
    held: number,
    first: { kind: AuditEvent["kind"]; ours: (data: unknown) => boolean },
  ): Promise<boolean> {
    const deadline = this.bus.clock.now() + FIRST_EVENT_WAIT_MS;
    for (;;) {
      const event = (await lastAuditEvent(this.bus, runId, first.kind))?.event;
      if (event && event.seq > held) return first.ours(event.data);
      if (this.bus.clock.now() >= deadline) return false;
      await this.bus.clock.sleep(100);
    }
  }

  /**
   * A halt or a cancel: stopping a run twice stops it once (the supervisor queues one stop per
   * state of the run), so it is asked again when its outcome is not known (the connection dropped
   * before the reply; the supervisor could not reach JetStream). The copy asked again may find the
   * first one's work done, the run `stopped` already, and be refused for it: told as done.
   */
  private async stop(
    subject: string,
    schema: typeof HaltRequest,
    value: HaltRequest,
    verb: string,
    stopped: (status: RunStatus) => string | undefined,
  ): Promise<string> {
    const { reply, resent } = await this.ask(subject, schema, value, true);
    if (reply.ok) return reply.message;
    const status =
      resent && reply.error.code === "INVALID_INPUT" ? await this.status.get(value.runId) : undefined;
    const now = status && stopped(status);
    if (now) {
      return `run ${value.runId}: ${now} (the reply to this ${verb} was lost, and the supervisor, asked again, found the run stopped already)`;
    }
    throw fromErrorPayload(reply.error);
  }

  private async ask<S extends z.ZodType>(
    subject: string,
    schema: S,
    value: z.input<S>,
    repeatable: boolean,
  ): Promise<{ reply: ControlReply; resent: boolean }> {
    const ask = (wait: ServiceWait | undefined): Promise<ControlReply> =>
      requestJson(this.bus.nc, subject, { schema, value }, ControlReply, {
        timeoutMs: REQUEST_TIMEOUT_MS,
        wait,
      });
    if (!repeatable || !this.wait) return { reply: await ask(this.wait), resent: false };
    return askUntilDecided(this.wait, ask);
  }
}
