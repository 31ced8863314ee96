import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { jetstream, jetstreamManager, StoreCompression } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { AckPublisher, PUBLISH_ACK_TIMEOUT_MS } from "../../shared/bus/ack-publisher.js";
import { provision } from "../../shared/bus/provision.js";
import { bucketStream, Subjects } from "../../shared/bus/subjects.js";
import { settleCall } from "../../shared/bus/tool-settle.js";
import { addIterations, readIterations } from "../../shared/bus/tree-iterations.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { actorEntry, NATS_USERS } from "../../services/local/cluster.js";
import { NATS_CONF } from "../../services/local/ensure-nats.js";
import { serveFromTest } from "../helpers/cluster-suite.js";
import { useConfUsers } from "../helpers/conf-users.js";
import { startNats } from "../helpers/nats-server.js";

type Kind = keyof typeof NATS_USERS;
const KINDS: Kind[] = ["supervisor", "agent", "critic", "tools", "cli", "console"];
const subjects = new Subjects();
const runProcess = promisify(execFile);

/** nats.conf as shipped (its permission model is the Kubernetes one): real connections, real denials. */
describe("nats.conf: least privilege per actor kind", () => {
  const { server: nats, as } = useConfUsers(subjects);
  const count = async (stream: string): Promise<number> => {
    const jsm = await jetstreamManager(await as("supervisor"));
    return (await jsm.streams.info(stream)).state.messages;
  };

  it("refuses unauthenticated connections and wrong passwords", async () => {
    await expect(connect({ servers: nats().url })).rejects.toThrow(/Authorization/i);
    await expect(connect({ servers: nats().url, user: "agent", pass: "guess" })).rejects.toThrow(
      /Authorization/i,
    );
  });

  it("only agent workers and the supervisor write the run log; only the supervisor records a refused submit", async () => {
    const before = await count("AGENT_LOG");
    for (const kind of ["tools", "critic", "cli", "console"] as const) {
      const js = jetstream(await as(kind), { timeout: 2_000 });
      await expect(js.publish(subjects.log("run-1", "step"), "{}"), kind).rejects.toThrow(/permission/i);
      await expect(js.publish(subjects.log("run-1", "run.committed"), "{}"), kind).rejects.toThrow(
        /permission/i,
      );
      await expect(js.publish(subjects.rejected("run-1"), "{}"), kind).rejects.toThrow(/permission/i);
    }
    const agent = jetstream(await as("agent"), { timeout: 2_000 });
    await expect(agent.publish(subjects.rejected("run-1"), "{}")).rejects.toThrow(/permission/i);
    // The runtime's own publisher is refused at once too, not after its ack timeout.
    const t0 = performance.now();
    const publisher = AckPublisher.of(await as("tools"));
    await expect(publisher.publish(subjects.log("run-1", "step"), new Uint8Array(2))).rejects.toThrow(
      /permission/i,
    );
    expect(performance.now() - t0).toBeLessThan(PUBLISH_ACK_TIMEOUT_MS / 2);
    expect(await count("AGENT_LOG")).toBe(before);
    await agent.publish(subjects.log("run-1", "step"), "{}");
    const supervisor = jetstream(await as("supervisor"), { timeout: 2_000 });
    await supervisor.publish(subjects.log("run-2", "run.admitted"), "{}");
    await supervisor.publish(subjects.rejected("run-3"), "{}");
    expect(await count("AGENT_LOG")).toBe(before + 3);
  });

  it("agentctl's user may acknowledge what its consumer on the run log delivers, never a worker's job", async () => {
    const cli = await as("cli");
    const ack = (stream: string) => cli.request(`$JS.ACK.${stream}.c.1.1.1.1.1`, "", { timeout: 500 });
    await expect(ack("AGENT_RUNS")).rejects.toThrow(/permission/i);
    // Allowed, an ack no consumer waits for goes unanswered: a timeout, not a refusal.
    await expect(ack("AGENT_LOG")).rejects.toThrow(/timeout|no responders/i);
  });

  it("the critic and agentctl's user cannot call a tool, or settle a call, as the agent can", async () => {
    const tools = await as("tools");
    const served = serveFromTest(echoTool, {
      nc: tools,
      subjects,
      idempotency: await new Kvm(tools).open(subjects.buckets().idempotency),
    });
    const describe = subjects.toolDescribe("echo");
    const agent = await as("agent");
    expect((await agent.request(describe, "", { timeout: 2_000 })).json()).toMatchObject({ name: "echo" });
    const critic = await as("critic");
    await expect(critic.request(describe, "", { timeout: 2_000 })).rejects.toThrow(/permission/i);
    await expect(critic.request(subjects.tool("echo"), "{}", { timeout: 2_000 })).rejects.toThrow(
      /permission/i,
    );
    // A cancel's worker settles the call its run halted on with the tool's service, which records it.
    const abandon = {
      decision: "abandon",
      schemaVersion: 1,
      runId: "run-1",
      actionId: "a1",
      idempotencyKey: "run-1:a1",
      by: "oncall",
      reason: "r",
    } as const;
    expect(await settleCall(agent, subjects, "echo", abandon, 2_000)).toEqual({ outcome: "abandoned" });
    await expect(settleCall(critic, subjects, "echo", abandon, 2_000)).rejects.toThrow(/permission/i);
    // agentctl's user may have a tool describe itself (a replay does), never call or settle it.
    const cli = await as("cli");
    expect((await cli.request(describe, "", { timeout: 2_000 })).json()).toMatchObject({ name: "echo" });
    await expect(cli.request(subjects.tool("echo"), "{}", { timeout: 2_000 })).rejects.toThrow(/permission/i);
    await expect(settleCall(cli, subjects, "echo", abandon, 2_000)).rejects.toThrow(/permission/i);
    served.stop();
  });

  it("only agent workers beat to each other: another actor cannot pose as a worker", async () => {
    const heard: string[] = [];
    const agent = await as("agent");
    const sub = agent.subscribe(subjects.workerBeatAll(), {
      callback: (_, msg) => void heard.push(msg.subject),
    });
    await agent.flush();
    for (const kind of KINDS) {
      const nc = await as(kind);
      nc.publish(subjects.workerBeat(`from-${kind}`), "{}");
      await nc.flush();
    }
    await agent.flush();
    sub.unsubscribe();
    expect(heard).toEqual([subjects.workerBeat("from-agent")]);
  });

  it("the supervisor hears the workers' beats: a registered convergence policy is checked against them", async () => {
    const heard: string[] = [];
    const supervisor = await as("supervisor");
    const sub = supervisor.subscribe(subjects.workerBeatAll(), {
      callback: (err, msg) => void heard.push(err ? `refused: ${err.message}` : msg.subject),
    });
    await supervisor.flush();
    const agent = await as("agent");
    agent.publish(subjects.workerBeat("w-1"), "{}");
    await agent.flush();
    await expect.poll(() => heard, { timeout: 2_000 }).toEqual([subjects.workerBeat("w-1")]);
    sub.unsubscribe();
  });

  it("only the supervisor writes agents-pool", async () => {
    const bucket = subjects.buckets().pool;
    for (const kind of KINDS.filter((k) => k !== "supervisor")) {
      const kv = await new Kvm(await as(kind)).open(bucket);
      await expect(kv.put("killswitch", "{}"), kind).rejects.toThrow(/permission/i);
      await expect(kv.delete("killswitch"), kind).rejects.toThrow(/permission/i);
    }
    const kv = await new Kvm(await as("supervisor")).open(bucket);
    expect(await kv.put("probe", "1")).toBeGreaterThan(0);
  });

  it("only agent workers and the critic write agents-model-breakers; only agent workers agents-tool-descriptors", async () => {
    const { modelBreakers, toolDescriptors } = subjects.buckets();
    const shared: [string, Kind[]][] = [
      [modelBreakers, ["agent", "critic"]],
      [toolDescriptors, ["agent"]],
    ];
    for (const [bucket, writers] of shared) {
      for (const kind of KINDS.filter((k) => !writers.includes(k))) {
        const kv = await new Kvm(await as(kind)).open(bucket);
        await expect(kv.put("cHJvdmlkZXI", "{}"), `${kind} ${bucket}`).rejects.toThrow(/permission/i);
        await expect(kv.delete("cHJvdmlkZXI"), `${kind} ${bucket}`).rejects.toThrow(/permission/i);
      }
      for (const kind of writers) {
        const kv = await new Kvm(await as(kind)).open(bucket);
        expect(await kv.create("cHJvdmlkZXI", "{}"), `${kind} ${bucket}`).toBeGreaterThan(0);
        await kv.delete("cHJvdmlkZXI");
        expect((await kv.get("cHJvdmlkZXI"))?.operation, `${kind} ${bucket}`).toBe("DEL");
      }
    }
  });

  it("nobody can delete or purge a stream or remove a message, but the supervisor a finished run's calls' records, its fan-out, its status and its tree's cap and counter, and only the supervisor creates or changes them", async () => {
    const buckets = subjects.buckets();
    const streams = ["AGENT_LOG", "AGENT_RUNS", "AGENT_COUNTERS", ...subjects.bucketList().map(bucketStream)];
    for (const kind of KINDS) {
      const jsm = await jetstreamManager(await as(kind), { timeout: 2_000 });
      for (const stream of streams) {
        await expect(jsm.streams.delete(stream), `${kind} ${stream}`).rejects.toThrow();
        // The supervisor's retention purges a retired tree's counter (see below).
        if (kind === "supervisor" && stream === "AGENT_COUNTERS") continue;
        await expect(jsm.streams.purge(stream), `${kind} ${stream}`).rejects.toThrow();
      }
      for (const stream of streams) {
        // The supervisor's retention removes a finished run's tool call records, its fan-out and
        // its status, and a root run's tree budget, each by its sequence.
        const retained = [
          bucketStream(buckets.idempotency),
          bucketStream(buckets.runs),
          bucketStream(buckets.pool),
        ];
        if (kind === "supervisor" && retained.includes(stream)) continue;
        await expect(jsm.streams.deleteMessage(stream, 1, false), `${kind} ${stream}`).rejects.toThrow(
          /permission/i,
        );
      }
      await expect(jsm.consumers.delete("AGENT_RUNS", "agent-workers"), kind).rejects.toThrow();
      if (kind !== "supervisor") {
        await expect(jsm.streams.add({ name: `ROGUE_${kind}`, subjects: [`rogue.${kind}`] })).rejects.toThrow(
          /permission/i,
        );
      }
    }
    const jsm = await jetstreamManager(await as("cli"));
    expect((await jsm.streams.info("AGENT_LOG")).config.name).toBe("AGENT_LOG");
    // A finished run's log stays until the stream's max_age: not even the supervisor removes it.
    const { seq } = await jetstream(await as("agent")).publish(subjects.log("finished-run", "step"), "{}");
    const supervisor = await jetstreamManager(await as("supervisor"), { timeout: 2_000 });
    await expect(
      supervisor.streams.purge("AGENT_LOG", { filter: subjects.logAll("finished-run") }),
    ).rejects.toThrow(/permission/i);
    await expect(supervisor.streams.deleteMessage("AGENT_LOG", seq, false)).rejects.toThrow(/permission/i);
    expect((await jsm.direct.getMessage("AGENT_LOG", { seq }))?.subject).toBe(
      subjects.log("finished-run", "step"),
    );
    const records = await new Kvm(await as("tools")).open(buckets.idempotency);
    const revision = await records.put("echo.finished-run-call", "{}");
    expect(await supervisor.streams.deleteMessage(bucketStream(buckets.idempotency), revision, false)).toBe(
      true,
    );
    expect(await records.get("echo.finished-run-call")).toBeNull();
    const runs = await new Kvm(await as("agent")).open(buckets.runs);
    const statusRevision = await runs.put("finished-run", "{}");
    expect(await supervisor.streams.deleteMessage(bucketStream(buckets.runs), statusRevision, false)).toBe(
      true,
    );
    expect(await runs.get("finished-run")).toBeNull();
    const pool = await new Kvm(await as("supervisor")).open(buckets.pool);
    const treeRevision = await pool.put("tree.finished-run", "{}");
    expect(await supervisor.streams.deleteMessage(bucketStream(buckets.pool), treeRevision, false)).toBe(
      true,
    );
    expect(await pool.get("tree.finished-run")).toBeNull();
    const counter = subjects.treeCounter("finished-run", "iterations");
    await addIterations({ nc: await as("agent"), subjects }, "finished-run", 3);
    expect(await supervisor.streams.purge("AGENT_COUNTERS", { filter: counter })).toMatchObject({
      purged: 1,
    });
  });

  it("only agent workers add to run trees' counters; every actor but the console (which shows none) reads them", async () => {
    for (const kind of KINDS.filter((k) => k !== "agent")) {
      await expect(addIterations({ nc: await as(kind), subjects }, "tree-p", 1), kind).rejects.toThrow(
        /permission/i,
      );
    }
    expect(await addIterations({ nc: await as("agent"), subjects }, "tree-p", 2)).toBe(2);
    for (const kind of KINDS.filter((k) => k !== "console")) {
      expect(
        await readIterations({ jsm: await jetstreamManager(await as(kind)), subjects }, "tree-p"),
        kind,
      ).toBe(2);
    }
  });

  it("streams an older supervisor made (no direct reads, no compression) are updated by this build's supervisor only, their messages kept; then every user reads them with direct gets", async () => {
    const supervisor = await jetstreamManager(await as("supervisor"));
    const { config } = await supervisor.streams.info("AGENT_LOG");
    await supervisor.streams.update("AGENT_LOG", {
      ...config,
      allow_direct: false,
      compression: StoreCompression.None,
    });
    const subject = subjects.log("older-run", "step");
    const { seq } = await jetstream(await as("agent")).publish(subject, "{}");
    // A worker of this build cannot change them: it is refused, and waits for the supervisor.
    await expect(provision(await as("agent"), { subjects, replicas: 1 })).rejects.toThrow(/permission/i);
    expect((await provision(await as("supervisor"), { subjects, replicas: 1 })).streams.AGENT_LOG).toBe(
      "updated",
    );
    expect(Object.values((await provision(await as("agent"), { subjects, replicas: 1 })).streams)).toEqual([
      "unchanged",
      "unchanged",
      "unchanged",
    ]);
    for (const kind of KINDS) {
      const jsm = await jetstreamManager(await as(kind));
      expect((await jsm.direct.getMessage("AGENT_LOG", { seq }))?.subject, kind).toBe(subject);
    }
  });

  it("agentctl, on a server no supervisor has provisioned, says it waits for one and gives up after AGENTCTL_WAIT_MS instead of hanging", async () => {
    await using fresh = await startNats({ configFile: NATS_CONF });
    const started = Date.now();
    const failed = await runProcess(process.execPath, [actorEntry("cli"), "runs"], {
      env: {
        ...process.env,
        NATS_URL: fresh.url,
        NATS_USER: NATS_USERS.cli.user,
        NATS_PASSWORD: NATS_USERS.cli.password,
        AGENTS_PREFIX: "agents",
        AGENTCTL_WAIT_MS: "2000",
      },
      timeout: 20_000,
    }).then(
      () => undefined,
      (err: unknown) => err as { code: number | null; stderr: string },
    );
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(failed?.code).toBe(2);
    expect(failed?.stderr).toContain("waiting up to 2000 ms for a supervisor");
    const error = JSON.parse(failed?.stderr.trim().split("\n").at(-1) ?? "{}") as {
      error?: { code: string; message: string };
    };
    expect(error.error?.code).toBe("BUS_UNAVAILABLE");
    expect(error.error?.message).toContain("start a supervisor under AGENTS_PREFIX 'agents'");
  }, 30_000);
});
