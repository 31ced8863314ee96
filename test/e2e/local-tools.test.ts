import { mkdir, mkdtemp, readFile, rm, symlink } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { echoCall, spec } from "../helpers/fixtures.js";
import { startServer, type TestServer } from "../helpers/http-server.js";

/**
 * Built-in tools run inside the workers (AGENT_LOCAL_TOOLS): no tool actor at all, so a call that
 * went over NATS would find nobody serving it.
 */
const suite = useClusterSuite("localtools", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  env: {
    AGENT_LOCAL_TOOLS: "echo,memory,http_fetch,file_read,file_write",
    AGENT_RETRY_DELAY_MS: "500",
  },
});

const servers: TestServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
});

const records = async (runId: string): Promise<WalRecord[]> => (await suite.wal(runId)).map((r) => r.record);

describe("built-in tools in the worker", () => {
  it("a run's echo calls run in its worker: no request on the tool's subjects, no idempotency record, the outputs in the run's log", async () => {
    const heard: string[] = [];
    const { nc, subjects } = suite.bus;
    for (const subject of [subjects.tool("echo"), `${subjects.tool("echo")}.>`])
      nc.subscribe(subject, { callback: (_err, msg) => void heard.push(msg.subject) });
    await nc.flush();
    const { runId } = await suite.client.submit(
      spec({
        script: [echoCall("one"), echoCall("two"), echoCall("three"), { text: "echoed three times" }],
        tools: ["echo"],
      }),
    );
    expect(await suite.waitFor(runId, settled)).toMatchObject({
      status: "committed",
      terminal: { output: "echoed three times" },
    });
    const log = await records(runId);
    const completed = log.flatMap((r) => (r.type === "COMPLETE" ? [r.event.output] : []));
    expect(completed).toEqual([{ text: "one" }, { text: "two" }, { text: "three" }]);
    const intents = log.flatMap((r) => (r.type === "INTENT" ? [r] : []));
    expect(intents).toHaveLength(3);
    for (const intent of intents) {
      const record = await suite.bus.buckets.idempotency.get(
        idempotencyBucketKey("echo", intent.idempotencyKey),
      );
      expect(record, intent.actionId).toBeNull();
    }
    await nc.flush();
    expect(heard).toEqual([]);
  }, 30_000);

  it("kill -9 of the worker in the middle of a local call: the successor runs it again, and the run commits with one COMPLETE for it", async () => {
    let first: () => void = () => undefined;
    const firstAsked = new Promise<void>((resolve) => (first = resolve));
    const held: ServerResponse[] = [];
    // The first fetch is held (its worker dies waiting for it); the one made again is answered.
    const server = await startServer((_req, res) => {
      if (held.length === 0) {
        held.push(res);
        first();
        return;
      }
      res.writeHead(200, { "content-type": "text/plain" }).end("the page");
    });
    servers.push(server);
    const { runId } = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "http_fetch", input: { url: `${server.url}/page` } }] },
          { toolCalls: [{ name: "finish", input: { answer: "fetched" } }] },
        ],
        tools: ["http_fetch"],
        capabilities: [{ kind: "network", allowedHosts: ["127.0.0.1"] }],
        privacy: "standard",
      }),
    );
    await firstAsked;
    const holder = await suite.lastWriter(runId);
    expect(holder).toMatch(/^agent-\d$/);
    suite.cluster.signal(holder as string, "SIGKILL");

    const status = await suite.waitFor(runId, settled, 25_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "fetched" } });
    expect(server.requests.map((r) => r.url)).toEqual(["/page", "/page"]);
    const log = await records(runId);
    const intents = log.flatMap((r) => (r.type === "INTENT" ? [r.actionId] : []));
    expect(intents).toHaveLength(1);
    const completes = log.filter((r) => r.type === "COMPLETE" && r.event.actionId === intents[0]);
    expect(completes).toHaveLength(1);
    expect(completes[0]).toMatchObject({ event: { output: { status: 200, body: "the page" } } });
    expect(log.filter((r) => r.type === "ABORT")).toEqual([]);
    const events = await suite.audit(runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.kind === "run.resumed")).toHaveLength(1);
    await suite.cluster.start("agent", `${holder as string}b`);
  }, 60_000);

  it("file_write and file_read run in the worker, confined to the grant: a symlink out is tool.denied", async () => {
    const dir = await mkdtemp(join(tmpdir(), "local-files-"));
    try {
      await mkdir(join(dir, "outside"));
      await mkdir(join(dir, "work"));
      await symlink(join(dir, "outside"), join(dir, "work", "out"));
      const work = join(dir, "work");
      const { runId } = await suite.client.submit(
        spec({
          script: [
            {
              toolCalls: [{ name: "file_write", input: { path: "a.txt", content: "written in the worker" } }],
            },
            { toolCalls: [{ name: "file_read", input: { path: join(work, "a.txt") } }] },
            { toolCalls: [{ name: "file_write", input: { path: "out/b.txt", content: "escaped" } }] },
            { text: "done" },
          ],
          tools: ["file_write", "file_read"],
          capabilities: [
            { kind: "fileRead", allowedPaths: [work] },
            { kind: "fileWrite", allowedPaths: [work] },
          ],
        }),
      );
      expect(await suite.waitFor(runId, settled)).toMatchObject({ status: "committed" });
      expect(await readFile(join(work, "a.txt"), "utf8")).toBe("written in the worker");
      const completed = (await records(runId)).flatMap((r) =>
        r.type === "COMPLETE" ? [r.event.output] : [],
      );
      expect(completed[1]).toMatchObject({ content: "written in the worker" });
      const denied = (await suite.audit(runId)).filter((e) => e.kind === "tool.denied");
      expect(denied.map((e) => [e.actor, e.data?.["code"]])).toEqual([
        ["tool:file_write", "PATH_NOT_ALLOWED"],
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it("in the worker, file_read under a `*` grant refuses /proc (the worker's environment: NATS password, model keys): tool.denied", async () => {
    const { runId } = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "file_read", input: { path: "/proc/self/environ" } }] },
          { toolCalls: [{ name: "file_read", input: { path: "/proc/1/environ" } }] },
          { text: "done" },
        ],
        tools: ["file_read"],
        capabilities: [{ kind: "fileRead", allowedPaths: ["*"] }],
      }),
    );
    expect(await suite.waitFor(runId, settled)).toMatchObject({ status: "committed" });
    const denied = (await suite.audit(runId)).filter((e) => e.kind === "tool.denied");
    expect(denied.map((e) => [e.actor, e.data?.["code"]])).toEqual([
      ["tool:file_read", "PATH_NOT_ALLOWED"],
      ["tool:file_read", "PATH_NOT_ALLOWED"],
    ]);
    expect(denied[0]?.reason).toMatch(/under \/proc/);
    expect((await records(runId)).filter((r) => r.type === "COMPLETE")).toEqual([]);
  }, 30_000);

  it("a tool that is not idempotent, named in AGENT_LOCAL_TOOLS, is refused at start with INVALID_INPUT naming it", async () => {
    await expect(
      suite.cluster.start("agent", "agent-refused", { AGENT_LOCAL_TOOLS: "echo,spawn_agent" }),
    ).rejects.toThrow(
      /exited with code 1 before it was ready:[\s\S]*"code":"INVALID_INPUT"[\s\S]*"msg":"stopping: invalid configuration: AGENT_LOCAL_TOOLS: 'spawn_agent' is not idempotent: a worker taking its run over would call it again/,
    );
  }, 30_000);
});
