import type { Approval } from "../contracts/control.js";
import type { LoopEvent } from "../contracts/loop-event.js";
import type { MemoryStore } from "../memory/memory.js";
import type { ModelDriver } from "../models/driver.js";
import { createDriver, type DriverFactoryDeps } from "../models/factory.js";
import type { PriceTable } from "../models/pricing.js";
import { ScriptedDriver } from "../models/scripted.js";
import type { Clock } from "../runtime/clock.js";
import { AgentError, toAgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { findGrant } from "../tools/capabilities.js";
import { ToolInvoker, type InvokerDeps, type InvokePolicy } from "../tools/invoke.js";
import type { ToolRegistry } from "../tools/registry.js";
import { outputExtras } from "../tools/tool.js";
import { checkingCritic, modelCritic, splitUsage, type Critic } from "./critic.js";
import type { AwaitingEffect, Effect, LoopState } from "./state.js";

export interface PerformerDeps {
  registry: ToolRegistry;
  clock: Clock;
  random: Random;
  env?: Readonly<Record<string, string | undefined>>;
  /** The generator's model; built from the RunSpec's ModelRef when absent. */
  driver?: ModelDriver;
  /** The critic; built from the RunSpec's critic ModelRef when absent. */
  critic?: Critic;
  /** A critic chosen per run (a remote critic service, told how many reviews came before). */
  criticFor?: (state: LoopState) => Critic;
  memory?: MemoryStore;
  /** Answers approval requests; without it a run waiting for approval parks. */
  approvals?: (runId: string, reason: string) => Promise<Approval>;
  invokePolicy?: Partial<InvokePolicy>;
  /** See InvokerDeps.onServiceWait. */
  onServiceWait?: InvokerDeps["onServiceWait"];
  /** Reaches a model served by another actor (ModelRef provider `actor`). */
  actorModel?: DriverFactoryDeps["actor"];
  /** Prices of the models built from ModelRefs (see loadPriceTable); absent: none, every call costs 0. */
  prices?: PriceTable;
  /** Puts something in front of each driver built from a ModelRef (the workers' model breakers). */
  guardDriver?: (driver: ModelDriver) => ModelDriver;
  /**
   * The input a call is sent with, when it is not the one the loop holds (the loop holds redacted
   * inputs; see LeaseRedaction). May throw an AgentError: the call is then aborted with it, unsent.
   */
  toolInput?: (effect: Extract<Effect, { type: "callTool" }>, state: LoopState) => Promise<unknown>;
  /** Traces each model call, tool call and review (see EffectSpans); absent: no tracing, no cost. */
  spans?: EffectSpans;
}

/**
 * Where the shell traces the effects it performs: `around` runs `perform` inside a span of the
 * effect and returns its event. Each call of a batch of tool calls gets a span of its own.
 */
export interface EffectSpans {
  around<E extends LoopEvent | undefined>(
    effect: AwaitingEffect,
    state: LoopState,
    perform: () => Promise<E>,
  ): Promise<E>;
}

/**
 * Performs the effects the loop waits on (memory recall, model call, tool call, critique,
 * approval) and turns each outcome, success or error, into the event the loop consumes next.
 * Shared by the in-process runner and the agent worker on NATS.
 */
export class EffectPerformer {
  private readonly invoker: ToolInvoker;
  private readonly drivers = new Map<string, ModelDriver>();
  private readonly idempotent = new Map<string, LoopEvent>();

  constructor(private readonly deps: PerformerDeps) {
    this.invoker = new ToolInvoker({
      clock: deps.clock,
      random: deps.random,
      ...(deps.invokePolicy ? { policy: deps.invokePolicy } : {}),
      ...(deps.onServiceWait ? { onServiceWait: deps.onServiceWait } : {}),
    });
  }

  /** Stores a memory (a committed run's question and answer) when the performer has a store. */
  async remember(namespace: string, text: string): Promise<void> {
    await this.deps.memory?.remember(namespace, text);
  }

  /** Stores a memory again unless it was forgotten since `storedAt` (see MemoryStore.restore): false only then. */
  async restore(namespace: string, text: string, storedAt: number): Promise<boolean> {
    return (await this.deps.memory?.restore(namespace, text, storedAt)) ?? true;
  }

  async perform(
    effect: AwaitingEffect,
    state: LoopState,
    signal?: AbortSignal,
  ): Promise<LoopEvent | undefined> {
    const spans = this.deps.spans;
    if (spans && effect.type !== "callTool")
      return spans.around(effect, state, () => this.performNow(effect, state, signal));
    return this.performNow(effect, state, signal);
  }

  private async performNow(
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
        return this.callTools(effect, state, signal);
      case "critique":
        try {
          const reviewed = splitUsage(await this.criticFor(state)(effect.request, signal));
          return { type: "criticReviewed", at: at(), ...reviewed };
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

  /**
   * A call, and the later calls of its batch at the same time (see act-batch.ts): their outcomes
   * are kept for their turns, when the loop asks for each.
   */
  private async callTools(
    effect: Extract<Effect, { type: "callTool" }>,
    state: LoopState,
    signal?: AbortSignal,
  ): Promise<LoopEvent> {
    const later = effect.concurrent ?? [];
    if (later.length === 0) return this.callTool(effect, state, signal);
    const [first] = await Promise.all([effect, ...later].map((e) => this.callTool(e, state, signal)));
    return first as LoopEvent;
  }

  private async callTool(
    effect: Extract<Effect, { type: "callTool" }>,
    state: LoopState,
    signal?: AbortSignal,
  ): Promise<LoopEvent> {
    const recorded = this.idempotent.get(effect.idempotencyKey);
    if (recorded) return { ...recorded, at: this.deps.clock.now() };
    const spans = this.deps.spans;
    const event = await (spans
      ? spans.around(effect, state, () => this.execute(effect, state, signal))
      : this.execute(effect, state, signal));
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
    let input: unknown;
    try {
      input = this.deps.toolInput ? await this.deps.toolInput(effect, state) : effect.input;
    } catch (err) {
      // The bucket out of reach is no answer: the lease fails, and the run is taken over.
      const error = toAgentError(err);
      if (error.code === "BUS_UNAVAILABLE" || error.code === "STORAGE_FULL") throw error;
      return aborted(error);
    }
    try {
      const result = await this.invoker.invoke(tool, input, {
        runId: state.runId,
        actionId: effect.actionId,
        idempotencyKey: effect.idempotencyKey,
        granted,
        privacy: state.spec.agent.privacy,
        depth: state.depth,
        ...(effect.approval ? { approval: effect.approval } : {}),
        ...(signal ? { signal } : {}),
      });
      return {
        type: "toolCompleted",
        at: this.deps.clock.now(),
        actionId: effect.actionId,
        output: result.output,
        ...outputExtras(result),
      };
    } catch (err) {
      const error = toAgentError(err, "TOOL_FAILED");
      // The bus had no room to record the call (its claim, or its outcome after it ran): not the
      // tool's failure, and no ABORT to write either. The run's lease fails, and whoever takes the
      // run over settles the call from the tool's record (see settle-call), as after a crash.
      if (error.code === "STORAGE_FULL") throw error;
      return aborted(error);
    }
  }

  /** A finished run's drivers and recorded tool results are dropped: a long-lived runner must not grow. */
  forget(runId: string): void {
    const prefix = `${runId}:`;
    for (const key of [...this.drivers.keys()]) if (key.startsWith(prefix)) this.drivers.delete(key);
    for (const key of [...this.idempotent.keys()]) if (key.startsWith(prefix)) this.idempotent.delete(key);
  }

  private driverFor(state: LoopState): ModelDriver {
    if (this.deps.driver) return this.deps.driver;
    // After a stall the run asks its escalation model: a driver of its own, which has answered the
    // responses since the switch (a scripted one continues from there on another worker).
    const escalation = state.spec.agent.escalationModel;
    const since = state.escalatedAtStep;
    if (escalation && since !== undefined) {
      return this.cachedDriver(`${state.runId}:escalated`, state.step - since, () =>
        this.buildDriver(escalation, state),
      );
    }
    return this.cachedDriver(`${state.runId}:generator`, state.step, () =>
      this.buildDriver(state.spec.agent.model, state),
    );
  }

  private criticFor(state: LoopState): Critic {
    if (this.deps.critic) return this.deps.critic;
    if (this.deps.criticFor) return this.deps.criticFor(state);
    const spec = state.spec.critic;
    if (!spec) throw new AgentError("INVALID_SPEC", "the run has no critic");
    const ref = spec.model;
    const model = ref
      ? modelCritic(
          this.cachedDriver(`${state.runId}:critic`, Math.max(0, state.critiques - 1), () =>
            this.buildDriver(ref, state),
          ),
        )
      : undefined;
    return checkingCritic(spec.checks ?? [], model);
  }

  /**
   * One driver per run and role. A scripted driver built for a run already under way (a worker
   * taking over) continues from the responses on record instead of starting the script over.
   */
  private cachedDriver(key: string, consumed: number, build: () => ModelDriver): ModelDriver {
    let driver = this.drivers.get(key);
    if (!driver) {
      const built = build();
      if (built instanceof ScriptedDriver) built.seek(consumed);
      driver = this.deps.guardDriver?.(built) ?? built;
      this.drivers.set(key, driver);
    }
    return driver;
  }

  private buildDriver(ref: LoopState["spec"]["agent"]["model"], state: LoopState): ModelDriver {
    return createDriver(ref, state.spec.agent.privacy, {
      env: this.deps.env ?? {},
      prices: this.deps.prices ?? {},
      http: { clock: this.deps.clock, random: this.deps.random },
      ...(this.deps.actorModel ? { actor: this.deps.actorModel } : {}),
    });
  }
}
