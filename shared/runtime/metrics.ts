import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { AuditEvent } from "../contracts/audit.js";

/**
 * The Prometheus metrics of one actor process, in a registry of its own (no global state, so
 * tests can make as many as they like). Names follow Prometheus conventions under `agents_`.
 */
export class ActorMetrics {
  readonly registry = new Registry();
  readonly runsAdmitted: Counter;
  readonly runsRejected: Counter<"code">;
  readonly steps: Counter;
  readonly phaseSeconds: Histogram<"phase">;
  readonly guardTrips: Counter<"reason" | "verdict">;
  readonly toolCalls: Counter<"tool" | "outcome">;
  readonly serviceWaits: Counter<"service">;
  readonly redeliveries: Counter;
  readonly fencingConflicts: Counter;
  readonly leaseFailures: Counter<"code">;
  readonly runsHoldingSlot: Gauge;
  readonly lostAdmissions: Counter<"outcome">;
  readonly toolRecordsRemoved: Counter;
  readonly statusesRemoved: Counter;
  readonly treeBudgetsRemoved: Counter;
  readonly orphansCancelled: Counter;
  readonly criticVerdicts: Counter<"passed">;
  readonly badRequests: Counter<"subject">;
  readonly modelBreakersOpened: Counter<"provider">;
  readonly modelCallsRefused: Counter<"provider">;
  readonly runsLeftWaiting: Counter<"provider">;
  readonly jetStreamAnswering: Gauge;

  constructor(actor: string) {
    this.registry.setDefaultLabels({ actor });
    collectDefaultMetrics({ register: this.registry });
    const registers = [this.registry];
    this.runsAdmitted = new Counter({ name: "agents_runs_admitted_total", help: "Runs admitted", registers });
    this.runsRejected = new Counter({
      name: "agents_runs_rejected_total",
      help: "Runs refused at admission, by error code",
      labelNames: ["code"],
      registers,
    });
    this.steps = new Counter({ name: "agents_steps_total", help: "Loop transitions driven", registers });
    this.phaseSeconds = new Histogram({
      name: "agents_phase_seconds",
      help: "Time a run waits on the effect of a step (model, tool, critic, memory), by effect",
      labelNames: ["phase"],
      buckets: [0.005, 0.02, 0.1, 0.5, 1, 2, 5, 15, 60, 300],
      registers,
    });
    this.guardTrips = new Counter({
      name: "agents_guard_trips_total",
      help: "Guard warnings, blocks and circuit breaks, by reason",
      labelNames: ["reason", "verdict"],
      registers,
    });
    this.toolCalls = new Counter({
      name: "agents_tool_calls_total",
      help: "Tool calls by tool and outcome",
      labelNames: ["tool", "outcome"],
      registers,
    });
    this.serviceWaits = new Counter({
      name: "agents_service_waits_total",
      help: "Requests that found nobody serving a tool, the critic or a model actor, and waited for a service, by service (tool:<name>, critic, model:<name>)",
      labelNames: ["service"],
      registers,
    });
    this.redeliveries = new Counter({
      name: "agents_job_redeliveries_total",
      help: "Jobs delivered more than once (a worker died, drained, or renewed a job too late)",
      registers,
    });
    this.fencingConflicts = new Counter({
      name: "agents_fencing_conflicts_total",
      help: "WAL appends refused because another worker wrote first",
      registers,
    });
    this.leaseFailures = new Counter({
      name: "agents_run_lease_failures_total",
      help: "Jobs whose run lease failed and went back to the queue, by error code",
      labelNames: ["code"],
      registers,
    });
    this.runsHoldingSlot = new Gauge({
      name: "agents_runs_holding_slot",
      help: "Runs holding a pool slot, by their status as the supervisor's last scan of the held slots read it (every SUPERVISOR_STALL_MS / 4, at most a minute); `unrecorded`: a slot whose admission has not recorded its run",
      labelNames: ["status"],
      registers,
    });
    this.lostAdmissions = new Counter({
      name: "agents_lost_admissions_total",
      help: "Admissions stopped midway that nobody finished within SUPERVISOR_STALL_MS: runs failed (ADMISSION_LOST) or slots freed",
      labelNames: ["outcome"],
      registers,
    });
    this.toolRecordsRemoved = new Counter({
      name: "agents_tool_records_removed_total",
      help: "Idempotency records of finished runs' tool calls removed with their status",
      registers,
    });
    this.statusesRemoved = new Counter({
      name: "agents_statuses_removed_total",
      help: "Finished runs whose status was removed after SUPERVISOR_STATUS_RETAIN_MS",
      registers,
    });
    this.treeBudgetsRemoved = new Counter({
      name: "agents_tree_budgets_removed_total",
      help: "Run trees whose iteration cap and counter were removed with their root run's status",
      registers,
    });
    this.orphansCancelled = new Counter({
      name: "agents_orphans_cancelled_total",
      help: "Runs cancelled because their parent failed while they were still going",
      registers,
    });
    this.criticVerdicts = new Counter({
      name: "agents_critic_verdicts_total",
      help: "Critic verdicts by outcome",
      labelNames: ["passed"],
      registers,
    });
    this.badRequests = new Counter({
      name: "agents_bad_requests_total",
      help: "Requests answered with a structured error, by subject",
      labelNames: ["subject"],
      registers,
    });
    this.modelBreakersOpened = new Counter({
      name: "agents_model_breakers_opened_total",
      help: "Model providers' breakers this worker opened (after AGENT_MODEL_BREAKER_FAILURES outages in a row) or opened again (a failed probe), by provider",
      labelNames: ["provider"],
      registers,
    });
    this.modelCallsRefused = new Counter({
      name: "agents_model_calls_refused_total",
      help: "Model turns not sent because their provider's breaker was open (the run waited the outage out without the call), by provider",
      labelNames: ["provider"],
      registers,
    });
    this.runsLeftWaiting = new Counter({
      name: "agents_runs_left_waiting_total",
      help: "Jobs of runs waiting on their provider's open breaker handed back unread (no takeover: the breaker would refuse the turn), by provider",
      labelNames: ["provider"],
      registers,
    });
    this.jetStreamAnswering = new Gauge({
      name: "agents_jetstream_answering",
      help: "1 while the NATS server's JetStream answers this actor, 0 once it has not for 15 s while the connection is up (no run moves)",
      registers,
    });
  }

  /**
   * Counts what a run's audit events say happened (guard trips, tool outcomes, critic verdicts):
   * the audit trail is already the record of each, so the metrics cannot disagree with it.
   */
  observeAudit(event: AuditEvent): void {
    if (event.kind.startsWith("guard.")) {
      const reason = event.data?.["guardReason"];
      this.guardTrips.inc({
        reason: typeof reason === "string" ? reason : "unknown",
        verdict: event.kind.slice("guard.".length),
      });
    } else if (
      event.kind === "tool.completed" ||
      event.kind === "tool.aborted" ||
      event.kind === "tool.denied"
    ) {
      const tool = event.actor.startsWith("tool:") ? event.actor.slice(5) : "unknown";
      this.toolCalls.inc({ tool, outcome: event.kind.slice(5) });
    } else if (event.kind === "critic.verdict") {
      this.criticVerdicts.inc({ passed: String(event.status === "passed") });
    }
  }
}
