import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { RunSpecInput } from "../../shared/contracts/run-spec.js";
import { replay } from "../../shared/loop/replay.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { defineTool, describeTool } from "../../shared/tools/tool.js";
import { settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { json, startServer, type Handler, type TestServer } from "../helpers/http-server.js";

/**
 * task.plan on a cluster: a supervisor and two agent workers, the nodes' children asking a local
 * OpenAI-compatible model server that answers each node by the name in its prompt.
 */
const suite = useClusterSuite("dag-plans", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  env: { OPENAI_API_KEY: "", AGENT_RETRY_DELAY_MS: "500" },
});

interface Chat {
  messages: { role: string; content?: string | null }[];
}

/** One model request the server answered: for which node, its prompt, and when it was in flight. */
interface Served {
  node: string;
  prompt: string;
  start: number;
  end: number;
}

interface ModelServer extends AsyncDisposable {
  server: TestServer;
  served: Served[];
  /** How many requests were in flight at once, at most. */
  peak: () => number;
}

/**
 * A chat-completions server: a prompt starting `node <id>:` is answered `out-<id>` after `delayMs`
 * (`d` answers `final` and the outputs its prompt was given); `fail(node, attempt)` says which
 * requests get a 400 instead.
 */
async function modelServer(
  delayMs: Record<string, number>,
  fail: (node: string, attempt: number) => boolean = () => false,
  proposals: unknown[] = [],
): Promise<ModelServer> {
  const served: Served[] = [];
  const asked = new Map<string, number>();
  let inFlight = 0;
  let peak = 0;
  const handler: Handler = (req, res) => {
    const chat = JSON.parse(req.body) as Chat;
    const system = chat.messages.find((m) => m.role === "system")?.content ?? "";
    // The run's PLAN asks for its plan: the next proposal, as JSON text.
    if (system.includes("plan it as a dependency graph")) {
      const content = JSON.stringify(proposals.shift() ?? {});
      json(res, 200, {
        id: "chatcmpl-plan",
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: "local",
        choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
        usage: { prompt_tokens: 40, completion_tokens: 40, total_tokens: 80 },
      });
      return;
    }
    const prompt = chat.messages.find((m) => m.role === "user")?.content ?? "";
    const node = /^node (\w+):/.exec(prompt)?.[1] ?? "?";
    const attempt = (asked.get(node) ?? 0) + 1;
    asked.set(node, attempt);
    const entry = { node, prompt, start: Date.now(), end: 0 };
    served.push(entry);
    inFlight += 1;
    peak = Math.max(peak, inFlight);
    setTimeout(() => {
      inFlight -= 1;
      entry.end = Date.now();
      if (fail(node, attempt)) {
        json(res, 400, { error: { message: `node ${node} is refused`, type: "invalid_request_error" } });
        return;
      }
      const seen = [...prompt.matchAll(/out-\w+/g)].map((m) => m[0]).join(" ");
      const content = node === "d" ? `final (${seen})` : `out-${node}`;
      json(res, 200, {
        id: `chatcmpl-${served.length}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: "local",
        choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
        usage: { prompt_tokens: 20, completion_tokens: 4, total_tokens: 24 },
      });
    }, delayMs[node] ?? 0);
  };
  const server = await startServer(handler);
  return { server, served, peak: () => peak, [Symbol.asyncDispose]: () => server.close() };
}

const DIAMOND = [
  { id: "a", prompt: "node a: gather the facts" },
  { id: "b", prompt: "node b: the left view", dependsOn: ["a"] },
  { id: "c", prompt: "node c: the right view", dependsOn: ["a"] },
  { id: "d", prompt: "node d: join both views", dependsOn: ["b", "c"] },
];

function planSpec(
  baseUrl: string,
  plan: Record<string, unknown>,
  resources: Record<string, number> = {},
): RunSpecInput {
  return {
    schemaVersion: 1,
    task: {
      prompt: "Write the report by its plan",
      verifiers: [{ kind: "regex", pattern: "^final" }],
      plan: plan,
    },
    agent: {
      name: "planner",
      model: { provider: "openai", model: "local", baseUrl: `${baseUrl}/v1` },
      tools: [],
      capabilities: [],
      resources: { maxRepairs: 2, ...resources },
    },
  };
}

const ofKind = (events: AuditEvent[], kind: string) => events.filter((e) => e.kind === kind);

describe("task.plan on the cluster: DAG plans executed as child runs", () => {
  it("CTL-5 a diamond plan with maxParallel 2 runs b and c as child runs at the same time, d sees both outputs, the parent commits d's answer", async () => {
    await using model = await modelServer({ b: 1_000, c: 1_000 });
    const { runId } = await suite.client.submit(
      planSpec(model.server.url, { nodes: DIAMOND, maxParallel: 2 }),
    );
    const status = await suite.waitFor(runId, settled, 60_000);
    expect(status.status, JSON.stringify(status.terminal)).toBe("committed");
    expect(status.terminal?.output).toBe("final (out-b out-c)");

    // One model request per node, none for the parent: its answer is its plan's.
    const byNode = new Map(model.served.map((s) => [s.node, s]));
    expect(model.served.map((s) => s.node).sort()).toEqual(["a", "b", "c", "d"]);
    const node = (n: string): Served => {
      const served = byNode.get(n);
      if (!served) throw new Error(`node ${n} was never asked`);
      return served;
    };
    const [a, b, c, d] = [node("a"), node("b"), node("c"), node("d")];
    // b and c were in flight together; a before both, d after both.
    expect(Math.max(b.start, c.start)).toBeLessThan(Math.min(b.end, c.end));
    expect(model.peak()).toBe(2);
    expect(a.end).toBeLessThanOrEqual(Math.min(b.start, c.start));
    expect(d.start).toBeGreaterThanOrEqual(Math.max(b.end, c.end));
    // d's child was given b's and c's outputs in its prompt.
    expect(d.prompt).toContain("[b]\nout-b");
    expect(d.prompt).toContain("[c]\nout-c");

    // Three rounds of child runs of the tree; the parent parked while each ran.
    const audit = await suite.audit(runId);
    const started = ofKind(audit, "plan.node.started").map((e) => e.data as { node: string; runId: string });
    expect(started.map((s) => s.node)).toEqual(["a", "b", "c", "d"]);
    for (const child of started) {
      const childStatus = await suite.client.status.get(child.runId);
      expect(childStatus).toMatchObject({
        status: "committed",
        parentRunId: runId,
        rootRunId: runId,
        depth: 1,
      });
    }
    expect(ofKind(audit, "plan.node.finished").map((e) => e.status)).toEqual(Array(4).fill("passed"));
    const parked = (await suite.logs())
      .split("\n")
      .filter((l) => l.includes(runId) && l.includes("parked until"));
    expect(parked.length).toBeGreaterThanOrEqual(3);
  }, 90_000);

  it("CTL-5 a failing node fails the parent (planNodeFailed) and its dependants never start", async () => {
    await using model = await modelServer({}, (node) => node === "b");
    const { runId } = await suite.client.submit(
      planSpec(model.server.url, { nodes: DIAMOND, maxParallel: 2 }),
    );
    const status = await suite.waitFor(runId, settled, 60_000);
    expect(status).toMatchObject({ status: "failed", terminal: { reason: "planNodeFailed" } });
    expect(model.served.map((s) => s.node).sort()).toEqual(["a", "b", "c"]);
    const audit = await suite.audit(runId);
    const failed = ofKind(audit, "plan.node.finished").filter((e) => e.status === "failed");
    expect(failed.map((e) => (e.data as { node: string }).node)).toEqual(["b"]);
    expect(ofKind(audit, "plan.node.started").map((e) => (e.data as { node: string }).node)).not.toContain(
      "d",
    );
  }, 90_000);

  it("CTL-5 with onNodeFailure repair a failed node runs again as a new child, told why, and the parent commits", async () => {
    await using model = await modelServer({}, (node, attempt) => node === "b" && attempt === 1);
    const { runId } = await suite.client.submit(
      planSpec(model.server.url, { nodes: DIAMOND, maxParallel: 2, onNodeFailure: "repair" }),
    );
    const status = await suite.waitFor(runId, settled, 60_000);
    expect(status.status, JSON.stringify(status.terminal)).toBe("committed");
    expect(status.terminal?.output).toBe("final (out-b out-c)");
    const retries = model.served.filter((s) => s.node === "b");
    expect(retries).toHaveLength(2);
    expect(retries[1]?.prompt).toContain("An earlier attempt at this step failed");
    const audit = await suite.audit(runId);
    const repairs = ofKind(audit, "repair.started").map((e) => e.data as { node: string; attempt: number });
    expect(repairs).toEqual([expect.objectContaining({ node: "b", attempt: 2 })]);
    const bChildren = ofKind(audit, "plan.node.started")
      .map((e) => e.data as { node: string; runId: string })
      .filter((s) => s.node === "b");
    expect(new Set(bChildren.map((s) => s.runId)).size).toBe(2);
  }, 90_000);

  it("CTL-5 a plan the model proposes in PLAN is checked as a given one (a cyclic proposal is asked again), then runs as child runs", async () => {
    const cyclic = {
      nodes: [
        { id: "a", prompt: "node a", dependsOn: ["b"] },
        { id: "b", prompt: "node b", dependsOn: ["a"] },
      ],
    };
    await using model = await modelServer({}, () => false, [cyclic, { nodes: DIAMOND }]);
    const { runId } = await suite.client.submit(
      planSpec(model.server.url, { propose: true, maxParallel: 2 }),
    );
    const status = await suite.waitFor(runId, settled, 60_000);
    expect(status.status, JSON.stringify(status.terminal)).toBe("committed");
    expect(status.terminal?.output).toBe("final (out-b out-c)");
    const audit = await suite.audit(runId);
    const proposed = ofKind(audit, "plan.proposed");
    expect(proposed.map((e) => e.status)).toEqual(["failed", "passed"]);
    expect(proposed[0]?.reason).toMatch(/dependency cycle among: a, b/);
    expect(ofKind(audit, "plan.node.started").map((e) => (e.data as { node: string }).node)).toEqual([
      "a",
      "b",
      "c",
      "d",
    ]);
    // The nodes' children asked the model once each; PLAN asked it twice.
    expect(model.served.map((s) => s.node).sort()).toEqual(["a", "b", "c", "d"]);
  }, 90_000);

  it("CTL-5 a cyclic plan is refused at submit with INVALID_SPEC naming the cycle", async () => {
    const cyclic = {
      nodes: [
        { id: "a", prompt: "node a", dependsOn: ["c"] },
        { id: "b", prompt: "node b", dependsOn: ["a"] },
        { id: "c", prompt: "node c", dependsOn: ["b"] },
      ],
    };
    const spec = { ...planSpec("http://127.0.0.1:9", cyclic), runId: "dag-cyclic" };
    await expect(suite.client.submit(spec)).rejects.toMatchObject({
      code: "INVALID_SPEC",
      message: expect.stringMatching(/dependency cycle among: a, b, c[\s\S]*task\.plan/) as string,
    });
    expect(await suite.client.status.get("dag-cyclic")).toBeUndefined();
  }, 30_000);
});

/**
 * Tools served from the test process that count their calls in flight: `lookup` is idempotent with
 * nothing to undo, `record` is not idempotent. Each call notes which INTENTs of its run's log are
 * there when it arrives.
 */
function probeTools(): {
  tools: ReturnType<typeof probe>[];
  peak: Record<string, number>;
  intentsSeen: string[][];
} {
  const peak: Record<string, number> = { lookup: 0, record: 0 };
  const inFlight: Record<string, number> = { lookup: 0, record: 0 };
  const intentsSeen: string[][] = [];
  function probe(name: "lookup" | "record", idempotent: boolean) {
    return defineTool({
      name,
      description: `${name}: a probe that takes 400 ms`,
      input: z.object({ key: z.string() }),
      capability: { kind: "compute" },
      reversibility: idempotent ? "pure" : "irreversible",
      idempotent,
      execute: async (input, ctx) => {
        inFlight[name] = (inFlight[name] ?? 0) + 1;
        peak[name] = Math.max(peak[name] ?? 0, inFlight[name] ?? 0);
        if (name === "lookup") {
          const wal = (await suite.wal(ctx.runId)).map((r) => r.record);
          intentsSeen.push(
            wal.flatMap((r) => (r.type === "INTENT" && r.tool === "lookup" ? [r.actionId] : [])),
          );
        }
        await systemClock.sleep(400);
        inFlight[name] = (inFlight[name] ?? 1) - 1;
        return { output: `${name} ${input.key}` };
      },
    });
  }
  return { tools: [probe("lookup", true), probe("record", false)], peak, intentsSeen };
}

describe("tool calls of one model response on the cluster", () => {
  it("CTL-5 concurrent idempotent calls overlap, their INTENTs durable together before any runs, while non-idempotent ones run one at a time; replay gives the same log", async () => {
    const { tools, peak, intentsSeen } = probeTools();
    const served = tools.map((tool) => suite.serveTool(tool));
    try {
      const calls = [
        ...["k1", "k2", "k3"].map((key) => ({ name: "lookup", input: { key } })),
        ...["r1", "r2"].map((key) => ({ name: "record", input: { key } })),
      ];
      const { runId } = await suite.client.submit(
        spec({
          script: [{ toolCalls: calls }, { toolCalls: [{ name: "finish", input: { answer: "looked up" } }] }],
          tools: ["lookup", "record"],
        }),
      );
      const status = await suite.waitFor(runId, settled, 30_000);
      expect(status.status, JSON.stringify(status.terminal)).toBe("committed");
      expect(peak).toEqual({ lookup: 3, record: 1 });
      // Every lookup found the three lookups' INTENTs in the log when it arrived.
      expect(intentsSeen).toEqual(Array(3).fill(["act-1", "act-2", "act-3"]));
      const wal = (await suite.wal(runId)).map((r) => r.record);
      const order = wal.flatMap((r) =>
        r.type === "INTENT" ? [`I ${r.tool}`] : r.type === "COMPLETE" ? [`C ${r.event.actionId}`] : [],
      );
      expect(order).toEqual([
        "I lookup",
        "I lookup",
        "I lookup",
        "C act-1",
        "C act-2",
        "C act-3",
        "I record",
        "C act-4",
        "I record",
        "C act-5",
      ]);
      // The log replays to the same records, the batch's outcomes taken in the model's order.
      const replayed = replay(wal, { tools: tools.map(describeTool) });
      expect(replayed.state.status).toBe("committed");
      expect(replayed.unwritten).toEqual([]);
    } finally {
      served.forEach((s) => s.stop());
    }
  }, 60_000);
});
