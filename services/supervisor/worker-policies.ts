import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import { decode } from "../../shared/bus/codec.js";
import type { Subjects } from "../../shared/bus/subjects.js";
import { isBuiltinPolicy } from "../../shared/loop/policy.js";
import type { Clock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";

/** One live worker instance as its last beat described it. */
export interface WorkerPolicySet {
  workerId: string;
  policies: readonly string[];
  /** Past this time without another beat, the worker counts as gone (its beat says how long). */
  until: number;
  leaving: boolean;
}

/**
 * Why a run naming `policy` cannot be admitted, or undefined when it can: a built-in policy always
 * can; a registered one only when workers are heard and every one of them registers it, since JetStream
 * gives the run's job to whichever worker pulls first, and one without the policy would fail the run.
 */
export function policyRefusal(
  policy: string | undefined,
  workers: readonly WorkerPolicySet[],
  now: number,
): AgentError | undefined {
  if (policy === undefined || isBuiltinPolicy(policy)) return undefined;
  const live = workers.filter((w) => !w.leaving && w.until >= now);
  const fix =
    "register it in every agent worker (AGENT_POLICY_MODULES, or startAgentWorker's policies), or name a built-in policy (gates, verifiers, neverConverges)";
  if (live.length === 0)
    return new AgentError("INVALID_SPEC", `policy '${policy}': no agent worker is heard; ${fix}`, {
      details: { field: "policy", policy, lacking: [] },
    });
  const lacking = [
    ...new Set(live.filter((w) => !w.policies.includes(policy)).map((w) => w.workerId)),
  ].sort();
  if (lacking.length === 0) return undefined;
  const registers = live.some((w) => w.policies.includes(policy));
  const message = registers
    ? `policy '${policy}' is not registered by agent worker(s) ${lacking.join(", ")}`
    : `policy '${policy}': no live agent worker registers it (heard: ${lacking.join(", ")})`;
  return new AgentError("INVALID_SPEC", `${message}; ${fix}`, {
    details: { field: "policy", policy, lacking },
  });
}

/**
 * The convergence policies the live agent workers register, as their beats (every AGENT_BEAT_MS)
 * say: what a submit naming a registered policy is checked against. Each supervisor replica
 * listens on its own; nothing is stored, since a worker's beat is the truth about that worker.
 */
export class WorkerPolicies {
  private readonly heard = new Map<string, WorkerPolicySet>();
  private sub: Subscription | undefined;
  private listeningSince = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly clock: Clock,
    /** How long after it starts listening the supervisor has heard every live worker (SUPERVISOR_WORKER_LISTEN_MS). */
    private readonly listenMs: number,
  ) {}

  start(): void {
    this.listeningSince = this.clock.now();
    this.sub = this.nc.subscribe(this.subjects.workerBeatAll(), {
      callback: (err, msg) => {
        if (err) return;
        try {
          const beat = decode(WorkerBeat, msg.data);
          this.heard.set(beat.instance, {
            workerId: beat.workerId,
            policies: beat.policies ?? [],
            until: this.clock.now() + beat.deadAfterMs,
            leaving: beat.leaving === true,
          });
        } catch {
          // A beat this build cannot read names no policy it can check.
        }
      },
    });
  }

  stop(): void {
    this.sub?.unsubscribe();
  }

  /** Refuses (INVALID_SPEC) a submit naming a registered policy some live worker lacks, or none is heard to have. */
  async check(policy: string | undefined): Promise<void> {
    if (policy === undefined || isBuiltinPolicy(policy)) return;
    // Moments after start, not every worker has beaten yet: the first submits wait for them.
    const early = this.listeningSince + this.listenMs - this.clock.now();
    if (early > 0) await this.clock.sleep(early);
    const now = this.clock.now();
    for (const [instance, worker] of this.heard) if (worker.until < now) this.heard.delete(instance);
    const refused = policyRefusal(policy, [...this.heard.values()], now);
    if (refused) throw refused;
  }
}
