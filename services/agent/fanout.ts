import { SpawnAgentInput } from "../../shared/contracts/control.js";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { childRunId, fanInResults, writeFanOut } from "../../shared/bus/fanout.js";
import type { ServiceWait } from "../../shared/bus/request.js";
import { isUndecided } from "../../shared/bus/decided.js";
import { submitRun } from "../../shared/bus/submit.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { isPlanRound } from "../../shared/loop/dag-progress.js";
import { SPAWN_AGENT_TOOL } from "../../shared/loop/saga.js";
import { childGrantRefusal, childSpec } from "../../shared/loop/child-grants.js";
import type { AwaitingEffect, LoopState } from "../../shared/loop/state.js";
import { toRfc3339 } from "../../shared/runtime/clock.js";
import { AgentError, fromErrorPayload, toAgentError } from "../../shared/runtime/errors.js";
import { findGrant } from "../../shared/tools/capabilities.js";

type ToolCall = Extract<AwaitingEffect, { type: "callTool" }>;
export const SPAWN_TOOL = SPAWN_AGENT_TOOL;

/**
 * `spawn_agent` without holding a worker: the children are submitted through the supervisor (each
 * admitted like any run), the fan-out is recorded, and the parent parks. When the last child
 * settles, the supervisor queues the parent again with the fan-in (one result per child, in order).
 */
export class FanOutHandler {
  private readonly status: RunStatusStore;

  constructor(
    private readonly bus: ActorBus,
    /** Waits for a supervisor when none serves admissions (one restarting). */
    private readonly wait?: ServiceWait,
  ) {
    this.status = new RunStatusStore(bus.buckets.runs, bus);
  }

  /**
   * `sent`: the input to spawn with, the model's own where the log holds it redacted (see
   * LeaseRedaction.input); it may throw (REDACTED_INPUT_LOST), and then nothing is spawned.
   */
  async spawn(
    effect: ToolCall,
    state: LoopState,
    sent: () => Promise<unknown> = () => Promise.resolve(effect.input),
  ): Promise<LoopEvent | "park"> {
    const refused = (error: AgentError): LoopEvent => ({
      type: "toolAborted",
      at: this.bus.clock.now(),
      actionId: effect.actionId,
      error: error.toBody(),
    });
    // A plan's round is the runtime's, asked for by the submitter's task.plan, not a model's call:
    // it needs no spawn grant; the cluster's depth limit (at each child's admission) bounds it.
    const planned = isPlanRound(state, effect.actionId);
    const grant = findGrant(state.spec.agent.capabilities, { kind: "spawn" });
    if (!planned && grant?.kind !== "spawn") {
      return refused(new AgentError("CAPABILITY_DENIED", "no capability grants tool 'spawn_agent'"));
    }
    if (!planned && grant?.kind === "spawn" && state.depth >= grant.maxDepth) {
      return refused(
        new AgentError(
          "DEPTH_LIMIT",
          `depth limit reached: depth ${state.depth} >= maxDepth ${grant.maxDepth}, no child spawned`,
        ),
      );
    }
    let given: unknown;
    try {
      given = await sent();
    } catch (err) {
      // The bucket out of reach is no answer: the lease fails, and the run is taken over.
      const error = toAgentError(err);
      if (error.code === "BUS_UNAVAILABLE" || error.code === "STORAGE_FULL") throw error;
      return refused(error);
    }
    const input = SpawnAgentInput.safeParse(given);
    if (!input.success) {
      return refused(new AgentError("INVALID_INPUT", `spawn_agent input: ${input.error.message}`));
    }
    const runs = input.data.runs;
    // As the model wrote them: what a child's spec left out (see childSpec).
    const asked = (given as { runs?: unknown[] }).runs ?? [];
    const fanOut = {
      parentRunId: state.runId,
      rootRunId: state.rootRunId,
      depth: state.depth,
      actionId: effect.actionId,
      children: runs.map((spec, i) => spec.runId ?? childRunId(state.runId, effect.actionId, i)),
    };
    await writeFanOut(this.bus.buckets.runs, fanOut);
    for (const [i, spec] of runs.entries()) {
      const runId = fanOut.children[i] as string;
      // What the parent's model asked for a child beyond what the parent has is never submitted;
      // the child's spending is bounded by its parent's, its privacy tier its parent's if unnamed.
      const beyond = childGrantRefusal(state.spec, spec);
      if (beyond) {
        await this.recordRefusal(runId, state, beyond);
        continue;
      }
      // A child's id is its parent's to name, so its submit may be sent twice: asked again when its
      // outcome is not known (see submitRun), instead of failing the lease.
      const reply = await submitRun(
        this.bus,
        {
          ...childSpec(state.spec, spec, asked[i]),
          runId,
          parent: { runId: state.runId, rootRunId: state.rootRunId, depth: state.depth },
        },
        this.wait,
      );
      // Not decided (JetStream out of reach at the supervisor, past the wait): no refusal to record
      // as the child's failure for good. The lease fails, and the spawn is sent again when retried.
      if (!reply.ok && isUndecided(reply.error)) throw fromErrorPayload(reply.error);
      if (!reply.ok) await this.recordRefusal(runId, state, reply.error);
    }
    const results = await fanInResults(this.bus.buckets.runs, fanOut);
    if (!results) return "park";
    return { type: "toolCompleted", at: this.bus.clock.now(), actionId: effect.actionId, output: results };
  }

  /**
   * A refused child settles at once as failed, with the refusal's code, so the fan-in can complete.
   * Never over a status already there: a child id naming another's run is refused (RUN_ID_TAKEN),
   * and that run's status is its own (the fan-in tells the parent it is not its child).
   */
  private async recordRefusal(
    runId: string,
    parent: LoopState,
    error: { code: string; message: string },
  ): Promise<void> {
    await this.status.create({
      runId,
      rootRunId: parent.rootRunId,
      parentRunId: parent.runId,
      depth: parent.depth + 1,
      status: "failed",
      phase: "PLAN",
      iteration: 0,
      usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 0, toolCalls: 0 },
      terminal: { kind: "FAIL", reason: `[${error.code}] ${error.message}` },
      updatedAt: toRfc3339(this.bus.clock.now()),
    });
  }
}
