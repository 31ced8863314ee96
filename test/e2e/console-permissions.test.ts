import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { describe, expect, it } from "vitest";
import { Subjects } from "../../shared/bus/subjects.js";
import { actorEntry, LocalCluster } from "../../services/local/cluster.js";
import { useConfUsers } from "../helpers/conf-users.js";

const subjects = new Subjects();

/**
 * nats.conf as shipped, for the web console's own user: what the console needs it may do, and
 * nothing else (real connections, real denials; the other users are in permissions.test.ts).
 */
describe("nats.conf: the web console's user", () => {
  const { server: nats, as } = useConfUsers(subjects);

  it("the web console, as its own user, serves the runs, a run, its tree, the cluster and both live feeds", async () => {
    const logDir = await mkdtemp(join(tmpdir(), "console-user-"));
    const cluster = new LocalCluster({ natsUrl: nats().url, useConfUsers: true, logDir });
    try {
      const { url } = await cluster.launch({
        entry: actorEntry("console"),
        name: "console",
        user: "console",
        env: { CONSOLE_PORT: "0", CONSOLE_CLUSTER_LISTEN_MS: "100" },
      });
      const get = (path: string) => fetch(new URL(path, url));
      const runId = "console-user-run";
      const status = {
        runId,
        status: "running",
        phase: "ACT",
        iteration: 1,
        usage: { inputTokens: 1, outputTokens: 1, costUsd: 0, modelCalls: 1, toolCalls: 0 },
        updatedAt: new Date().toISOString(),
      };
      const runs = await new Kvm(await as("agent")).open(subjects.buckets().runs);
      await runs.put(runId, JSON.stringify(status));
      // The live feeds, each through its own watcher or consumer, under the console's user.
      const feeds = new AbortController();
      const open = async (path: string) => {
        const res = await fetch(new URL(path, url), { signal: feeds.signal });
        expect(res.status, path).toBe(200);
        const reader = res.body?.getReader();
        let text = "";
        return async (event: string): Promise<string> => {
          while (!text.includes(`event: ${event}`)) {
            const chunk = await reader?.read();
            if (!chunk || chunk.done) throw new Error(`${path} ended before its ${event} event: ${text}`);
            text += new TextDecoder().decode(chunk.value as Uint8Array);
          }
          return text;
        };
      };
      const followed = await open(`/api/live/runs/${runId}`);
      expect(await followed("status")).toContain(`"runId":"${runId}"`);
      const changes = await open("/api/live/runs");
      await changes("ready");
      await runs.put(runId, JSON.stringify({ ...status, iteration: 2 }));
      expect(await changes("change")).toContain(runId);
      feeds.abort();
      for (const path of ["/api/runs", `/api/runs/${runId}`, `/api/runs/${runId}/tree`, "/api/cluster"]) {
        const res = await get(path);
        expect(res.status, `${path}: ${await res.clone().text()}`).toBe(200);
      }
      expect(await (await get("/api/runs")).json()).toMatchObject({
        runs: [expect.objectContaining({ runId })],
      });
      await runs.delete(runId);
    } finally {
      await cluster.stop(5_000);
    }
  });

  it("the web console's user reads the log, the statuses and the cluster, and operates only through the supervisor's subjects: no submit, no cancel, no acks, no worker's job", async () => {
    const console = await as("console");
    const refused = (subject: string) =>
      expect(console.request(subject, "{}", { timeout: 1_000 }), subject).rejects.toThrow(/permission/i);
    // Asked with nobody answering (no supervisor here): no responders, never a refusal.
    const allowed = (subject: string) =>
      expect(console.request(subject, "{}", { timeout: 1_000 }), subject).rejects.toThrow(
        /timeout|no responders/i,
      );
    for (const subject of [
      subjects.approvals("run-1"),
      subjects.halt(),
      subjects.resume(),
      subjects.killSwitch(),
      subjects.supervisorPing(),
      subjects.criticPing(),
      subjects.toolDescribe("echo"),
    ])
      await allowed(subject);
    for (const subject of [
      subjects.runsSubmit(),
      subjects.cancel(),
      subjects.tool("echo"),
      subjects.criticReview(),
      subjects.model("m"),
      "$JS.ACK.AGENT_LOG.c.1.1.1.1.1",
      "$JS.API.CONSUMER.MSG.NEXT.AGENT_RUNS.agent-workers",
      "$JS.API.CONSUMER.CREATE.AGENT_RUNS.thief",
      "$JS.API.CONSUMER.DURABLE.CREATE.AGENT_RUNS.thief",
      // Its JetStream requests are an allow list: no pausing or deleting another's consumer, no
      // durable of its own, no pulling the supervisor's messages, no reading the workers' queue,
      // memory or idempotency records.
      "$JS.API.CONSUMER.PAUSE.AGENT_RUNS.agent-workers",
      "$JS.API.CONSUMER.DELETE.AGENT_LOG.supervisor-release",
      "$JS.API.CONSUMER.DELETE.AGENT_RUNS.agent-workers",
      "$JS.API.CONSUMER.DURABLE.CREATE.AGENT_LOG.thief",
      "$JS.API.CONSUMER.CREATE.AGENT_LOG.thief",
      "$JS.API.CONSUMER.MSG.NEXT.AGENT_LOG.supervisor-release",
      "$JS.API.CONSUMER.MSG.NEXT.AGENT_LOG.supervisor-status-retention",
      "$JS.API.STREAM.MSG.GET.AGENT_RUNS",
      "$JS.API.DIRECT.GET.AGENT_RUNS",
      "$JS.API.STREAM.LEADER.STEPDOWN.AGENT_LOG",
      "$JS.API.CONSUMER.CREATE.KV_agents-memory.thief.$KV.agents-memory.>",
      ...["memory", "idempotency"].flatMap((bucket) => [
        `$JS.API.STREAM.MSG.GET.KV_agents-${bucket}`,
        `$JS.API.DIRECT.GET.KV_agents-${bucket}`,
        `$JS.API.DIRECT.GET.KV_agents-${bucket}.$KV.agents-${bucket}.key`,
      ]),
    ])
      await refused(subject);
    // The one consumer create it may ask for is the one the server keeps ephemeral.
    const durable = console.request(
      "$JS.API.CONSUMER.CREATE.AGENT_LOG",
      JSON.stringify({
        stream_name: "AGENT_LOG",
        config: { durable_name: "console-durable", ack_policy: "none" },
      }),
      { timeout: 1_000 },
    );
    expect((await durable).json<{ error?: { code: number } }>().error?.code).toBe(400);
    await expect(
      jetstreamManager(await as("supervisor")).then((m) => m.consumers.info("AGENT_LOG", "console-durable")),
    ).rejects.toThrow(/not found/i);
    const runs = await new Kvm(console).open(subjects.buckets().runs);
    await expect(runs.put("run-1", "{}")).rejects.toThrow(/permission/i);
    // It reads: the log's messages, the statuses, the workers' beats.
    const { seq } = await jetstream(await as("agent")).publish(subjects.log("console-run", "step"), "{}");
    const jsm = await jetstreamManager(console);
    expect((await jsm.direct.getMessage("AGENT_LOG", { seq }))?.subject).toBe(
      subjects.log("console-run", "step"),
    );
    await new Kvm(await as("agent")).open(subjects.buckets().runs).then((kv) => kv.put("console-run", "{}"));
    expect((await runs.get("console-run"))?.string()).toBe("{}");
    const heard: string[] = [];
    const sub = console.subscribe(subjects.workerBeatAll(), {
      callback: (_, msg) => void heard.push(msg.subject),
    });
    await console.flush();
    const agent = await as("agent");
    agent.publish(subjects.workerBeat("w-9"), "{}");
    await agent.flush();
    await expect.poll(() => heard, { timeout: 2_000 }).toEqual([subjects.workerBeat("w-9")]);
    sub.unsubscribe();
  });
});
