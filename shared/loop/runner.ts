import type { AuditEvent } from "../contracts/audit.js";
import type { LoopEvent } from "../contracts/loop-event.js";
import { RunSpec, type RunSpecInput } from "../contracts/run-spec.js";
import type { WalRecord } from "../contracts/wal.js";
import { AgentError } from "../runtime/errors.js";
import type { IdGenerator } from "../runtime/ids.js";
import type { Logger } from "../runtime/logger.js";
import { startRun, transition } from "./fsm.js";
import { EffectPerformer, type PerformerDeps } from "./performer.js";
import type { ConvergencePolicy, RegisteredPolicies } from "./policy.js";
import type { AwaitingEffect, Effect, LoopConfig, LoopState, Transition } from "./state.js";

export interface RunnerDeps extends PerformerDeps {
  ids: IdGenerator;
  policy?: ConvergencePolicy;
  /** Policies a RunSpec's `policy` may name besides the built-in ones (see registerPolicies). */
  policies?: RegisteredPolicies;
  checkpointEvery?: number;
  /** Every effect as it happens (WAL records, audit events): the live event stream. */
  onEffect?: (effect: Effect) => void;
  /** One line per audit event, with runId, phase and iteration; silent when absent. */
  logger?: Logger;
}

export interface RunOptions {
  runId?: string;
  rootRunId?: string;
  parentRunId?: string;
  depth?: number;
  signal?: AbortSignal;
  /** Whether the run's FAIL undoes what its committed children did (see StartEvent). */
  undoChildren?: boolean;
}

export interface RunResult {
  state: LoopState;
  wal: WalRecord[];
  audit: AuditEvent[];
  /** The hash after each transition: equal lists mean identical runs. */
  transitions: string[];
}

/**
 * Runs the loop in this process: performs each effect the transition function asks for and
 * feeds the answer back, until the run is terminal or parked waiting for a human.
 */
export class LoopRunner {
  private readonly performer: EffectPerformer;

  constructor(private readonly deps: RunnerDeps) {
    this.performer = new EffectPerformer(deps);
  }

  config(): LoopConfig {
    return {
      tools: this.deps.registry.descriptors(),
      ...(this.deps.policy ? { policy: this.deps.policy } : {}),
      ...(this.deps.policies ? { policies: this.deps.policies } : {}),
      ...(this.deps.checkpointEvery !== undefined ? { checkpointEvery: this.deps.checkpointEvery } : {}),
    };
  }

  async run(input: RunSpecInput | RunSpec, options: RunOptions = {}): Promise<RunResult> {
    const parsed = RunSpec.safeParse(input);
    if (!parsed.success) {
      throw new AgentError("INVALID_SPEC", `invalid RunSpec: ${parsed.error.message}`, {
        details: parsed.error.issues,
      });
    }
    const spec = parsed.data;
    const runId = options.runId ?? spec.runId ?? this.deps.ids.next("run");
    const result: RunResult = {
      state: undefined as unknown as LoopState,
      wal: [],
      audit: [],
      transitions: [],
    };
    // Built once per run: it derives every tool's JSON Schema, too costly to repeat per transition.
    const config = this.config();
    const first = startRun(
      {
        type: "start",
        at: this.deps.clock.now(),
        spec,
        runId,
        rootRunId: options.rootRunId ?? runId,
        ...(options.parentRunId ? { parentRunId: options.parentRunId } : {}),
        depth: options.depth ?? 0,
        ...(options.undoChildren ? { undoChildren: true } : {}),
      },
      config,
    );
    return this.drive(first, result, config, options.signal);
  }

  /** Feeds an outside event (an approval, a halt, a resume) to a parked or running state. */
  async send(previous: RunResult, event: LoopEvent, signal?: AbortSignal): Promise<RunResult> {
    const config = this.config();
    const next = transition(previous.state, event, config);
    return this.drive(
      next,
      {
        ...previous,
        wal: [...previous.wal],
        audit: [...previous.audit],
        transitions: [...previous.transitions],
      },
      config,
      signal,
    );
  }

  private async drive(
    first: Transition,
    result: RunResult,
    config: LoopConfig,
    signal?: AbortSignal,
  ): Promise<RunResult> {
    let current = first;
    for (;;) {
      result.state = current.state;
      result.transitions.push(current.state.transitionHash);
      let awaiting: AwaitingEffect | undefined;
      for (const effect of current.effects) {
        this.deps.onEffect?.(effect);
        if (effect.type === "wal") result.wal.push(effect.record);
        else if (effect.type === "audit") {
          result.audit.push(effect.event);
          this.log(effect.event);
        } else if (effect.type === "storeMemory")
          await this.performer.remember(effect.namespace, effect.text);
        else awaiting = effect;
      }
      if (!awaiting) {
        if (current.state.status === "committed" || current.state.status === "failed")
          this.performer.forget(current.state.runId);
        return result;
      }
      const event = await this.performer.perform(awaiting, current.state, signal);
      if (!event) return result;
      current = transition(current.state, event, config);
    }
  }

  private log(event: AuditEvent): void {
    const logger = this.deps.logger;
    if (!logger) return;
    const line = {
      runId: event.runId,
      phase: event.phase,
      iteration: event.iteration,
      kind: event.kind,
      status: event.status,
    };
    const failed = event.status === "failed" || event.kind === "guard.warn";
    if (failed) logger.warn(line, event.reason ?? event.kind);
    else logger.info(line, event.reason ?? event.kind);
  }
}
