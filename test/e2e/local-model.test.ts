import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  json,
  startServer,
  type Handler,
  type RecordedRequest,
  type TestServer,
} from "../helpers/http-server.js";
import { AGENTCTL, runProcess, settled, useClusterSuite } from "../helpers/cluster-suite.js";

const EXAMPLE = fileURLToPath(new URL("../../examples/local-model.json", import.meta.url));
/** The model the example names, the one the test's server has "pulled". */
const PULLED = "qwen2.5:3b";

const suite = useClusterSuite("local-model", {
  actors: [{ kind: "supervisor" }, { kind: "agent" }],
  // A machine with no model key at all: a loopback server is asked without one.
  env: { OPENAI_API_KEY: "" },
});

interface ChatMessage {
  role: string;
  content?: string | null;
  tool_call_id?: string;
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
}
interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: { type: string; function: { name: string } }[];
}

const chatOf = (req: RecordedRequest): ChatRequest => JSON.parse(req.body) as ChatRequest;

/**
 * A local model as Ollama's `/v1/chat/completions` answers, following the example's prompt: with no
 * tool result yet it calls echo with the prompt's quoted text, then it answers with the tool's text.
 * A model it does not have gets Ollama's 404.
 */
const localModel: Handler = (req, res) => {
  const chat = chatOf(req);
  if (chat.model !== PULLED) {
    const message = `model "${chat.model}" not found, try pulling it first`;
    json(res, 404, { error: { message, type: "not_found_error", param: null, code: null } });
    return;
  }
  const reply = (message: Record<string, unknown>, finish: string) =>
    json(res, 200, {
      id: `chatcmpl-${chat.messages.length}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: chat.model,
      system_fingerprint: "fp_ollama",
      choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finish }],
      usage: { prompt_tokens: 90, completion_tokens: 12, total_tokens: 102 },
    });
  const result = chat.messages.findLast((m) => m.role === "tool");
  if (result) {
    const { text } = JSON.parse(result.content ?? "{}") as { text?: string };
    reply({ content: text ?? "I could not read the tool's result." }, "stop");
    return;
  }
  const prompt = chat.messages.find((m) => m.role === "user")?.content ?? "";
  const text = /"([^"]+)"/.exec(prompt)?.[1] ?? "";
  const call = { id: "call_echo_1", index: 0, type: "function", function: { name: "echo", arguments: "" } };
  call.function.arguments = JSON.stringify({ text });
  reply({ content: "", tool_calls: [call] }, "tool_calls");
};

interface ServedExample extends AsyncDisposable {
  server: TestServer;
  /** The spec file to submit. */
  file: string;
  /** The base URL in it. */
  baseUrl: string;
}

/**
 * The model server on the example's port (Ollama's) when it is free, and the spec file to submit:
 * the example as printed, or when a real server holds that port (or `model` is given), a copy in
 * which only the base URL's host:port (and the model) differ.
 */
async function serveExample(model?: string): Promise<ServedExample> {
  const printed = await readFile(EXAMPLE, "utf8");
  const printedUrl = (JSON.parse(printed) as { agent: { model: { baseUrl: string } } }).agent.model.baseUrl;
  const { host, port } = new URL(printedUrl);
  const server = await startServer(localModel, Number(port)).catch(() => startServer(localModel));
  const served = { server, file: EXAMPLE, baseUrl: printedUrl, [Symbol.asyncDispose]: () => server.close() };
  if (server.port === Number(port) && model === undefined) return served;
  const baseUrl = printedUrl.replace(`//${host}/`, `//127.0.0.1:${server.port}/`);
  let copy = printed.replace(printedUrl, baseUrl);
  if (model !== undefined) copy = copy.replace(`"model": "${PULLED}"`, `"model": "${model}"`);
  expect(copy).not.toBe(printed);
  const file = join(suite.logDir, `local-model-${server.port}.json`);
  await writeFile(file, copy);
  return { ...served, file, baseUrl };
}

/** agentctl as examples/README.md prints it; a failed watch answers what it printed too. */
function submitWatch(file: string): Promise<{ code: number; stdout: string }> {
  return runProcess(process.execPath, [AGENTCTL, "submit", file, "--watch"], {
    env: suite.env(),
    timeout: 60_000,
  }).then(
    (done) => ({ code: 0, ...done }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
}

describe("examples/local-model.json: a local OpenAI-compatible model", () => {
  it("runs as printed (a copy naming another port when 11434 is taken) against a server speaking chat-completions: one echo round trip, the tool's result sent back, the answer committed", async () => {
    await using example = await serveExample();
    const { server, file } = example;
    const { code, stdout } = await submitWatch(file);
    expect({ code, stdout }).toEqual({ code: 0, stdout: expect.stringMatching(/committed/) as string });
    expect(stdout).toMatch(/\nhello from a local model\n/);
    const runId = /^admitted (\S+)/.exec(stdout)?.[1] ?? "";
    const status = await suite.waitFor(runId, settled);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "hello from a local model" } });

    // What the model server saw: the spec's path and model, the echo tool offered, no key sent.
    const chats = server.requests.map((req) => ({ req, chat: chatOf(req) }));
    expect(chats).toHaveLength(2);
    for (const { req, chat } of chats) {
      expect(req).toMatchObject({ method: "POST", url: "/v1/chat/completions" });
      expect(req.headers.authorization).toBeUndefined();
      expect(chat.model).toBe(PULLED);
      expect(chat.tools?.map((t) => t.function.name)).toContain("echo");
    }
    // The second request carries the call the model made and the echo tool's result for it.
    const second = chats[1]?.chat.messages ?? [];
    expect(second.find((m) => m.role === "assistant")?.tool_calls).toEqual([
      {
        id: "call_echo_1",
        type: "function",
        function: { name: "echo", arguments: JSON.stringify({ text: "hello from a local model" }) },
      },
    ]);
    const result = second.find((m) => m.role === "tool");
    expect(result).toMatchObject({ tool_call_id: "call_echo_1" });
    expect(JSON.parse(result?.content ?? "")).toEqual({ text: "hello from a local model" });
  }, 90_000);

  it("with a model the server has not pulled, fails at once, the watch saying what the server answered and where", async () => {
    await using example = await serveExample("llama3.2");
    const { server, file, baseUrl } = example;
    const { code, stdout } = await submitWatch(file);
    expect({ code, stdout }).toEqual({
      code: 1,
      stdout: expect.stringMatching(/FAIL: modelError/) as string,
    });
    const diagnosis = stdout.split("\n").find((line) => line.startsWith("diagnosis: ")) ?? "";
    expect(diagnosis).toContain(`model \\"llama3.2\\" not found, try pulling it first`);
    expect(diagnosis).toContain(`(POST ${baseUrl}/chat/completions)`);
    expect(server.requests).toHaveLength(1);
  }, 90_000);
});
