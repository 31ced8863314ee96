import type { AuditEvent } from "../contracts/audit.js";
import type { Approval } from "../contracts/control.js";
import type { LoopEvent } from "../contracts/loop-event.js";
import { RunSpec, type RunSpecInput } from "../contracts/run-spec.js";
import type { WalRecord } from "../contracts/wal.js";
import type { MemoryStore } from "../memory/memory.js";
import type { ModelDriver } from "../models/driver.js";
import { createDriver } from "../models/factory.js";
import type { Clock } from "../runtime/clock.js";
import { AgentError, toAgentError } from "../runtime/errors.js";
import type { IdGenerator } from "../runtime/ids.js";
import type { Logger } from "../runtime/logger.js";
import type { Random } from "../runtime/random.js";
import { findGrant } from "../tools/capabilities.js";
import { ToolInvoker, type InvokePolicy } from "../tools/invoke.js";
import type { ToolRegistry } from "../tools/registry.js";
import { modelCritic, type Critic } from "./critic.js";
import { startRun, transition } from "./fsm.js";
import type { ConvergencePolicy } from "./policy.js";
import type { AwaitingEffect, Effect, LoopConfig, LoopState, Transition } from "./state.js";

export interface RunnerDeps {
  registry: ToolRegistry;
  clock: Clock;
  random: Random;
  ids: IdGenerator;
  env?: Readonly<Record<string, string | undefined>>;
  /** The generator's model; built from the RunSpec's ModelRef when absent. */
  driver?: ModelDriver;
  /** The critic; built from the RunSpec's critic ModelRef when absent. */
  critic?: Critic;
  memory?: MemoryStore;
  /** Answers approval requests; without it a run waiting for approval parks and `send` continues it. */
  approvals?: (runId: string, reason: string) => Promise<Approval>;
  policy?: ConvergencePolicy;
  checkpointEvery?: number;
  invokePolicy?: Partial<InvokePolicy>;
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
  private readonly invoker: ToolInvoker;
  private readonly drivers = new Map<string, ModelDriver>();
  private readonly idempotent = new Map<string, LoopEvent>();

  constructor(private readonly deps: RunnerDeps) {
    this.invoker = new ToolInvoker({
      clock: deps.clock,
      random: deps.random,
      ...(deps.invokePolicy ? { policy: deps.invokePolicy } : {}),
    });
  }

  config(): LoopConfig {
    return {
      tools: this.deps.registry.descriptors(),
      ...(this.deps.policy ? { policy: this.deps.policy } : {}),
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
          await this.deps.memory?.remember(effect.namespace, effect.text);
        else awaiting = effect;
      }
      if (!awaiting) {
        if (current.state.status === "committed" || current.state.status === "failed")
          this.forget(current.state.runId);
        return result;
      }
      const event = await this.perform(awaiting, current.state, signal);
      if (!event) return result;
      current = transition(current.state, event, config);
    }
  }

  private async perform(
    effect: AwaitingEffect,
    state: LoopState,
    signal?: AbortSignal,
  ): Promise<LoopEvent | undefined> {
    const at = (): number => this.deps.clock.now();
    switch (effect.type) {
      case "recallMemory": {
        const entries = (await this.deps.memory?.recall(effect.namespace, effect.query, effect.limit)) ?? [];
        return { type: "memoryRecalled", at: at(), memories: entries.map((e) => e.text) };
      }
      case "callModel":
        try {
          const response = await this.driverFor(state).complete(effect.request, signal);
          return { type: "modelResponded", at: at(), requestId: effect.requestId, response };
        } catch (err) {
          return {
            type: "modelFailed",
            at: at(),
            requestId: effect.requestId,
            error: toAgentError(err).toBody(),
          };
        }
      case "callTool":
        return this.callTool(effect, state, signal);
      case "critique":
        try {
          const verdict = await this.criticFor(state)(effect.request, signal);
          return { type: "criticReviewed", at: at(), verdict };
        } catch (err) {
          return { type: "criticFailed", at: at(), error: toAgentError(err).toBody() };
        }
      case "requestApproval": {
        if (!this.deps.approvals) return undefined;
        const approval = await this.deps.approvals(state.runId, effect.reason);
        return { type: "approvalDecided", at: at(), ...approval };
      }
    }
  }

  private async callTool(
    effect: Extract<Effect, { type: "callTool" }>,
    state: LoopState,
    signal?: AbortSignal,
  ): Promise<LoopEvent> {
    const recorded = this.idempotent.get(effect.idempotencyKey);
    if (recorded) return { ...recorded, at: this.deps.clock.now() };
    const event = await this.execute(effect, state, signal);
    this.idempotent.set(effect.idempotencyKey, event);
    return event;
  }

  private async execute(
    effect: Extract<Effect, { type: "callTool" }>,
    state: LoopState,
    signal?: AbortSignal,
  ): Promise<LoopEvent> {
    const tool = this.deps.registry.get(effect.tool);
    const aborted = (error: AgentError): LoopEvent => ({
      type: "toolAborted",
      at: this.deps.clock.now(),
      actionId: effect.actionId,
      error: error.toBody(),
    });
    if (!tool) return aborted(new AgentError("UNKNOWN_TOOL", `unknown tool '${effect.tool}'`));
    const granted = findGrant(state.spec.agent.capabilities, tool.capability);
    if (!granted)
      return aborted(new AgentError("CAPABILITY_DENIED", `no capability grants tool '${effect.tool}'`));
    try {
      const result = await this.invoker.invoke(tool, effect.input, {
        runId: state.runId,
        actionId: effect.actionId,
        idempotencyKey: effect.idempotencyKey,
        granted,
        privacy: state.spec.agent.privacy,
        depth: state.depth,
        ...(signal ? { signal } : {}),
      });
      return {
        type: "toolCompleted",
        at: this.deps.clock.now(),
        actionId: effect.actionId,
        output: result.output,
        ...(result.signals ? { signals: result.signals } : {}),
      };
    } catch (err) {
      return aborted(toAgentError(err, "TOOL_FAILED"));
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

  /** A finished run's drivers and recorded tool results are dropped: a long-lived runner must not grow. */
  private forget(runId: string): void {
    const prefix = `${runId}:`;
    for (const key of [...this.drivers.keys()]) if (key.startsWith(prefix)) this.drivers.delete(key);
    for (const key of [...this.idempotent.keys()]) if (key.startsWith(prefix)) this.idempotent.delete(key);
  }

  private driverFor(state: LoopState): ModelDriver {
    if (this.deps.driver) return this.deps.driver;
    return this.cachedDriver(`${state.runId}:generator`, () =>
      this.buildDriver(state.spec.agent.model, state),
    );
  }

  private criticFor(state: LoopState): Critic {
    if (this.deps.critic) return this.deps.critic;
    const ref = state.spec.critic?.model;
    if (!ref) throw new AgentError("INVALID_SPEC", "the run has no critic");
    return modelCritic(this.cachedDriver(`${state.runId}:critic`, () => this.buildDriver(ref, state)));
  }

  private cachedDriver(key: string, build: () => ModelDriver): ModelDriver {
    let driver = this.drivers.get(key);
    if (!driver) {
      driver = build();
      this.drivers.set(key, driver);
    }
    return driver;
  }

  private buildDriver(ref: LoopState["spec"]["agent"]["model"], state: LoopState): ModelDriver {
    return createDriver(ref, state.spec.agent.privacy, {
      env: this.deps.env ?? {},
      prices: {},
      http: { clock: this.deps.clock, random: this.deps.random },
    });
  }
}
