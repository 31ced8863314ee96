import { describe, expect, it } from "vitest";
import type { RunSpecInput } from "../../shared/contracts/run-spec.js";
import { json, startServer, type Handler, type RecordedRequest } from "../helpers/http-server.js";
import { settled, useClusterSuite } from "../helpers/cluster-suite.js";

const suite = useClusterSuite("samples", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  // A loopback server is asked without a key; a lost worker's job is offered again after 2 s.
  env: { OPENAI_API_KEY: "", AGENT_ACK_WAIT_MS: "2000", AGENT_RETRY_DELAY_MS: "500" },
});

interface ChatRequest {
  model: string;
  messages: { role: string; content?: string | null }[];
  max_tokens?: number;
  temperature?: number;
  seed?: number;
}
const chatOf = (req: RecordedRequest): ChatRequest => JSON.parse(req.body) as ChatRequest;

/**
 * An OpenAI-compatible server whose answer depends on the request's seed alone, as a seeded
 * sampler's would: `answers[seed - firstSeed]`, the last one past the end.
 */
function seededModel(firstSeed: number, answers: string[], hold?: (chat: ChatRequest) => boolean): Handler {
  return (req, res) => {
    const chat = chatOf(req);
    // A request held is never answered: its caller is about to be killed.
    if (hold?.(chat)) return;
    const at = Math.min((chat.seed ?? firstSeed) - firstSeed, answers.length - 1);
    json(res, 200, {
      id: `chatcmpl-${req.body.length}`,
      object: "chat.completion",
      model: chat.model,
      choices: [{ index: 0, message: { role: "assistant", content: answers[at] }, finish_reason: "stop" }],
      usage: { prompt_tokens: 20, completion_tokens: 3, total_tokens: 23 },
    });
  };
}

function sampledSpec(
  baseUrl: string,
  model: Record<string, unknown>,
  task: Partial<RunSpecInput["task"]> = {},
  maxIterations = 10,
): RunSpecInput {
  return {
    schemaVersion: 1,
    task: { prompt: "Which city is the capital of France?", verifiers: [{ kind: "nonEmpty" }], ...task },
    agent: {
      name: "sampler",
      model: { provider: "openai", model: "local-3b", baseUrl: `${baseUrl}/v1`, ...model },
      tools: [],
      capabilities: [],
      resources: { maxIterations },
    },
  };
}

describe("CTL-4 self-consistency on a cluster, against a local OpenAI-compatible server", () => {
  it("CTL-4 the wire requests carry temperature, max_tokens and seed, the seed moving by one per sample", async () => {
    await using server = await startServer(seededModel(11, ["Paris", "Paris", "Paris"]));
    const { runId } = await suite.client.submit(
      sampledSpec(server.url, { temperature: 0.7, seed: 11, maxTokens: 512 }, { samples: 3 }),
    );
    expect(await suite.waitFor(runId, settled)).toMatchObject({ status: "committed" });
    const chats = server.requests.map(chatOf);
    expect(chats.map((c) => [c.temperature, c.max_tokens, c.seed])).toEqual([
      [0.7, 512, 11],
      [0.7, 512, 12],
      [0.7, 512, 13],
    ]);
    // The three samples are the same question.
    expect(new Set(chats.map((c) => JSON.stringify(c.messages))).size).toBe(1);
    // What was sent is in the run's log, call by call.
    const called = (await suite.audit(runId)).filter((e) => e.kind === "model.called");
    expect(called.map((e) => [e.data?.temperature, e.data?.maxTokens, e.data?.seed])).toEqual([
      [0.7, 512, 11],
      [0.7, 512, 12],
      [0.7, 512, 13],
    ]);
  }, 60_000);

  it("CTL-4 a model call always carries max_tokens: the default when the spec names none", async () => {
    await using server = await startServer(seededModel(0, ["Paris"]));
    const { runId } = await suite.client.submit(sampledSpec(server.url, {}));
    expect(await suite.waitFor(runId, settled)).toMatchObject({ status: "committed" });
    expect(server.requests.map(chatOf).map((c) => [c.max_tokens, c.temperature, c.seed])).toEqual([
      [4096, undefined, undefined],
    ]);
  }, 60_000);

  it("CTL-4 with samples: 3 answering A, B, A the run commits A, agreement 2/3 in the audit and the provenance", async () => {
    await using server = await startServer(seededModel(1, ["Paris", "Lyon", "Paris"]));
    const { runId } = await suite.client.submit(
      sampledSpec(server.url, { temperature: 0.9, seed: 1 }, { samples: 3 }),
    );
    const status = await suite.waitFor(runId, settled);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "Paris" } });
    expect(status.usage.modelCalls).toBe(3);
    expect(status.usage.inputTokens).toBe(60);
    const audit = await suite.audit(runId);
    const clustered = audit.find((e) => e.kind === "samples.clustered");
    expect(clustered?.data).toMatchObject({
      samples: 3,
      clusters: [
        { size: 2, samples: [1, 3] },
        { size: 1, samples: [2] },
      ],
      chosen: { sample: 1, size: 2 },
      agreement: 2 / 3,
    });
    const kinds = audit.map((e) => e.kind);
    expect(kinds.indexOf("samples.clustered")).toBeLessThan(kinds.indexOf("run.committed"));
    expect(status.terminal?.provenance).toMatchObject({ agreement: 2 / 3 });
  }, 60_000);

  it("CTL-4 samples are counted by maxIterations: a budget too small for the samples circuit-breaks", async () => {
    await using server = await startServer(seededModel(1, ["Paris"]));
    const { runId } = await suite.client.submit(
      sampledSpec(server.url, { temperature: 0.9, seed: 1 }, { samples: 3 }, 2),
    );
    const status = await suite.waitFor(runId, settled);
    expect(status).toMatchObject({ status: "failed", terminal: { reason: "maxIterations" } });
    // Two samples asked, the third refused before it reached the server.
    expect(server.requests).toHaveLength(2);
    const audit = await suite.audit(runId);
    expect(audit.find((e) => e.kind === "guard.circuit_break")).toMatchObject({
      data: { guardReason: "maxIterations" },
    });
    expect(audit.map((e) => e.kind)).not.toContain("samples.clustered");
  }, 60_000);

  it("CTL-4 kill -9 of the worker mid-round: another takes the run over, asks again only the samples not on record, and the vote is the same", async () => {
    let held: () => void = () => undefined;
    const holding = new Promise<void>((resolve) => (held = resolve));
    let heldOnce = false;
    const hold = (chat: ChatRequest): boolean => {
      if (chat.seed !== 3 || heldOnce) return false;
      heldOnce = true;
      held();
      return true;
    };
    await using server = await startServer(seededModel(1, ["Paris", "Lyon", "Paris"], hold));
    const { runId } = await suite.client.submit(
      sampledSpec(server.url, { temperature: 0.9, seed: 1 }, { samples: 3 }),
    );
    await holding;
    const holder = await suite.lastWriter(runId);
    expect(holder).toMatch(/^agent-\d\w*$/);
    suite.cluster.signal(holder as string, "SIGKILL");

    const status = await suite.waitFor(runId, settled, 30_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "Paris" } });
    // Each sample is on record once answered: the new worker asks again only the one in flight,
    // with its seed, so the same answer.
    const seeds = server.requests.map((r) => chatOf(r).seed);
    expect(seeds).toEqual([1, 2, 3, 3]);
    // One response on record per sample, one vote.
    const models = (await suite.wal(runId)).filter((r) => r.record.type === "MODEL");
    expect(models).toHaveLength(3);
    const votes = (await suite.audit(runId)).filter((e) => e.kind === "samples.clustered");
    expect(votes.map((e) => e.data?.agreement)).toEqual([2 / 3]);
    await suite.cluster.start("agent", `${holder as string}b`);
  }, 60_000);
});
