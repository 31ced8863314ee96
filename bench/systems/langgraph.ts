import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { z } from "zod";
import type { LoopTiming } from "../lib/drive.ts";
import { FINAL_ANSWER, PASSING_VERDICT, STEPS, TOOL_STEPS, echoText } from "../lib/workload.ts";

export type LangGraphVariant = "sqlite-sync" | "sqlite-async" | "memory";

const echo = tool(({ text }: { text: string }) => text, {
  name: "echo",
  description: "Returns its input.",
  schema: z.object({ text: z.string() }),
});

/** The scripted model: the step number is the count of AI turns so far, as in our scripted driver. */
function scriptedModel(state: typeof MessagesAnnotation.State): { messages: BaseMessage[] } {
  const step = state.messages.filter((m) => m.getType() === "ai").length + 1;
  if (step > TOOL_STEPS) return { messages: [new AIMessage(FINAL_ANSWER)] };
  const call = {
    id: `call-${step}`,
    name: "echo",
    args: { text: echoText(step) },
    type: "tool_call" as const,
  };
  return { messages: [new AIMessage({ content: "", tool_calls: [call] })] };
}

function critic(): { messages: BaseMessage[] } {
  return { messages: [new AIMessage({ content: PASSING_VERDICT, name: "critic" })] };
}

/**
 * W1 as a LangGraph.js StateGraph: a model node, a tools node, a conditional edge between them,
 * and a critic node before the end; each loop its own thread_id. `sqlite-sync` waits for each
 * step's checkpoint (durable like ours), `sqlite-async` is LangGraph's default, `memory` keeps
 * nothing durable.
 */
export class LangGraphLoop {
  private readonly graph;
  private readonly durability: "sync" | "async";
  private readonly dir: string;
  private readonly saver: SqliteSaver | undefined;
  private next = 0;

  private constructor(variant: LangGraphVariant, dir: string) {
    this.dir = dir;
    this.durability = variant === "sqlite-sync" ? "sync" : "async";
    this.saver = variant === "memory" ? undefined : SqliteSaver.fromConnString(this.dbPath);
    const checkpointer = this.saver ?? new MemorySaver();
    this.graph = new StateGraph(MessagesAnnotation)
      .addNode("model", scriptedModel)
      .addNode("tools", new ToolNode([echo]))
      .addNode("critic", critic)
      .addEdge(START, "model")
      .addConditionalEdges("model", toolsCondition, { tools: "tools", [END]: "critic" })
      .addEdge("tools", "model")
      .addEdge("critic", END)
      .compile({ checkpointer });
  }

  static async create(variant: LangGraphVariant): Promise<LangGraphLoop> {
    return new LangGraphLoop(variant, await mkdtemp(join(tmpdir(), "bench-langgraph-")));
  }

  private get dbPath(): string {
    return join(this.dir, "checkpoints.sqlite");
  }

  async runLoop(): Promise<LoopTiming> {
    const threadId = `loop-${(this.next += 1)}`;
    const t0 = performance.now();
    let last = t0;
    const stepsMs: number[] = [];
    const stream = await this.graph.stream(
      { messages: [new HumanMessage("Echo nineteen times, then answer.")] },
      {
        configurable: { thread_id: threadId },
        durability: this.durability,
        streamMode: "updates",
        recursionLimit: 100,
      },
    );
    for await (const update of stream) {
      if (!("model" in update)) continue;
      const at = performance.now();
      stepsMs.push(at - last);
      last = at;
    }
    return { stepsMs, loopMs: performance.now() - t0, ok: stepsMs.length === STEPS };
  }

  /**
   * Bytes the SqliteSaver stored: every column of its checkpoint and write rows (the logical size,
   * comparable to what JetStream reports for a stream; the file's size moves in pages). 0 for the
   * in-memory saver.
   */
  storedBytes(): Promise<number> {
    const db = this.saver?.db;
    if (!db) return Promise.resolve(0);
    const row = (sql: string): number => (db.prepare(sql).get() as { n: number | null }).n ?? 0;
    return Promise.resolve(
      row(
        "SELECT SUM(LENGTH(thread_id)+LENGTH(checkpoint_ns)+LENGTH(checkpoint_id)+IFNULL(LENGTH(parent_checkpoint_id),0)+IFNULL(LENGTH(type),0)+LENGTH(checkpoint)+LENGTH(metadata)) AS n FROM checkpoints",
      ) +
        row(
          "SELECT SUM(LENGTH(thread_id)+LENGTH(checkpoint_ns)+LENGTH(checkpoint_id)+LENGTH(task_id)+8+LENGTH(channel)+IFNULL(LENGTH(type),0)+IFNULL(LENGTH(value),0)) AS n FROM writes",
        ),
    );
  }

  async stop(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
