import type { ScriptStep } from "../../shared/contracts/model.js";
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
