import type { KV } from "@nats-io/kv";
import { childRunId } from "../../shared/bus/fanout.js";
import { openTree } from "../../shared/bus/tree-iterations.js";
import type { ScriptStep } from "../../shared/contracts/model.js";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { startRun } from "../../shared/loop/fsm.js";
import type { AwaitingEffect, LoopState } from "../../shared/loop/state.js";
import type { ClusterSuite } from "./cluster-suite.js";
import { spec } from "./fixtures.js";

/** A child answering at once after a model turn of 2 s. */
const ONE_SLOW_TURN: ScriptStep[] = [{ text: "child's answer", delayMs: 2_000 }];

/**
 * Submits a parent that spawns one child (`childScript`: by default one model turn of 2 s, with
 * `childTools`) and then answers `answer`, after `finishMs`; returns once the child runs, the
 * parent waiting for it.
 */
export async function parentOfOne(
  suite: ClusterSuite,
  answer: string,
  finishMs = 0,
  childScript = ONE_SLOW_TURN,
  childTools?: string[],
): Promise<{ runId: string; childId: string }> {
  const child = spec({ script: childScript, ...(childTools ? { tools: childTools } : {}) });
  const { runId } = await suite.client.submit(
    spec({
      script: [
        { toolCalls: [{ name: "spawn_agent", input: { runs: [child] } }] },
        { toolCalls: [{ name: "finish", input: { answer } }], delayMs: finishMs },
      ],
      // A child is given only what its parent has.
      tools: ["spawn_agent", ...(childTools ?? ["echo"])],
      capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
    }),
  );
  const childId = `${runId}-act-1-1`;
  await suite.waitFor(childId, (s) => s.status === "running", 10_000);
  return { runId, childId };
}

type SpawnEffect = Extract<AwaitingEffect, { type: "callTool" }>;

/**
 * A parent run's state at its model's call of `spawn_agent` for one child (`spec()`), for a
 * FanOutHandler driven by the test: its tree given a cap, as its admission does, the call as its
 * effect, and the child's id.
 */
export async function spawnCall(
  pool: KV,
  parentId: string,
): Promise<{ state: LoopState; effect: SpawnEffect; childId: string }> {
  const parentSpec = RunSpec.parse(
    spec({ tools: ["spawn_agent", "echo"], capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"] }),
  );
  const { state } = startRun(
    { type: "start", at: Date.now(), spec: parentSpec, runId: parentId, rootRunId: parentId, depth: 0 },
    { tools: [] },
  );
  await openTree(pool, parentId, 100);
  const effect: SpawnEffect = {
    type: "callTool",
    actionId: "act-1",
    tool: "spawn_agent",
    input: { runs: [spec()] },
    idempotencyKey: `${parentId}:act-1`,
    purpose: "act",
    timeoutMs: 10_000,
  };
  return { state, effect, childId: childRunId(parentId, "act-1", 0) };
}
