import { createServer, type Server } from "node:http";
import { mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ClusterHealth } from "../../services/cli/cluster-health.js";
import { Kvm } from "@nats-io/kv";
import { callCriticRoll } from "../../shared/bus/service-roll.js";
import { callSupervisorRoll } from "../../shared/bus/supervisor-roll.js";
import { LocalCluster, NATS_USERS, actorEntry, type ActorProcess } from "../../services/local/cluster.js";
import { NATS_CONF } from "../../services/local/ensure-nats.js";
import { connectBus } from "../../shared/bus/connect.js";
import { Subjects } from "../../shared/bus/subjects.js";
import { listenForWorkers } from "../../shared/bus/worker-roll.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { AGENTCTL, runProcess } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";
import { until } from "../helpers/until.js";

const SUBSCRIBER = fileURLToPath(new URL("../../examples/audit-subscriber.mjs", import.meta.url));
/** SUPERVISOR_STATUS_RETAIN_MS here. */
const RETAIN_MS = 10_000;

// A key planted in the workers' environment; a hostile model endpoint echoes it back in its error.
const PLANTED = `sk-planted-${process.pid}-${Date.now().toString(36)}-do-not-leak`;

/**
 * The whole cluster under nats.conf's users (one per actor kind), started in the wrong order: the
 * workers, critic and tools come up first and wait until the supervisor has provisioned.
 */
describe("a cluster under the shipped permission model", () => {
  let server: TestNats;
  let cluster: LocalCluster;
  let logDir: string;
  let hostile: Server;
  const seenKeys: string[] = [];
  const cli = (...args: string[]) =>
    runProcess(process.execPath, [AGENTCTL, ...args], {
      env: {
        ...process.env,
        NATS_URL: server.url,
        NATS_USER: NATS_USERS.cli.user,
        NATS_PASSWORD: NATS_USERS.cli.password,
      },
    });

  /** A spec file whose model is the hostile endpoint, its key read from `apiKeyEnv`. */
  const hostileSpec = async (name: string, apiKeyEnv: string): Promise<string> => {
    const file = join(logDir, name);
    const run = spec({ tools: ["echo"] });
    const baseUrl = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}/v1`;
    run.agent.model = { provider: "openai", model: "gpt-test", baseUrl, apiKeyEnv };
    await writeFile(file, JSON.stringify(run));
    return file;
  };

  beforeAll(async () => {
    server = await startNats({ configFile: NATS_CONF });
    logDir = await mkdtemp(join(tmpdir(), "secured-"));
    hostile = createServer((req, res) => {
      seenKeys.push(req.headers.authorization ?? "");
      res
        .writeHead(401, { "content-type": "application/json" })
        .end(JSON.stringify({ error: { message: `invalid key: ${req.headers.authorization ?? ""}` } }));
    });
    await new Promise<void>((resolve) => hostile.listen(0, "127.0.0.1", resolve));
    cluster = new LocalCluster({
      natsUrl: server.url,
      useConfUsers: true,
      logDir,
      env: { PLANTED_MODEL_KEY: PLANTED, MODEL_KEY_ENVS: "PLANTED_MODEL_KEY", AGENT_RETRY_DELAY_MS: "500" },
    });
    const early: Promise<ActorProcess>[] = [
      // Every tool remote: the tools actor serves the calls, under its own user.
      cluster.start("agent", "agent-1", { AGENT_LOCAL_TOOLS: "" }),
      cluster.start("critic"),
      cluster.start("tools", "tools", { TOOLS: "echo,memory" }),
    ];
    // Give them time to find the streams missing and start waiting.
    await new Promise((r) => setTimeout(r, 1_500));
    // A finished run's status and tool calls' records are removed ten seconds after it finished:
    // after the tests that read them, before the one that checks they are gone.
    await cluster.start("supervisor", "supervisor", { SUPERVISOR_STATUS_RETAIN_MS: String(RETAIN_MS) });
    await Promise.all(early);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop(5_000);
    await server?.stop();
    hostile?.close();
  });

  it("agentctl cluster, as agentctl's own user, reports every store and the workers' queue, healthy", async () => {
    const { stdout } = await cli("cluster", "--json");
    const health = JSON.parse(stdout) as ClusterHealth;
    expect(health.problems).toEqual([]);
    expect(health.stores.map((store) => store.replicas)).toEqual(new Subjects().storeStreams().map(() => 1));
    // The workers created their consumer (a report without it says no worker has started).
    expect(health.jobs).toMatchObject({ waiting: 0, pulls: expect.any(Number) as number });
    // agentctl's user may hear the workers' beats: the one worker is listed.
    expect(health.workers.refused).toBeUndefined();
    expect(health.workers.workers.map((w) => [w.workerId, w.leaving])).toEqual([["agent-1", false]]);
    // And may call the supervisors' roll: the one supervisor answers with its settings.
    expect(health.supervisors.refused).toBeUndefined();
    expect(health.supervisors.supervisors).toEqual([
      expect.objectContaining({ poolCapacity: 16, maxDepth: 3, treeIterationCap: 1_000, stallMs: 600_000 }),
    ]);
    // And the critics' roll: the one critic answers. No run has listed a tool yet.
    expect(health.critics.refused).toBeUndefined();
    expect(health.critics.critics).toHaveLength(1);
    expect(health.tools).toMatchObject({ tools: [] });
    expect(health.tools.refused).toBeUndefined();
  });

  it("a user that may not hear the workers' beats, nor call the supervisors' roll, gets rolls that say the server refused them", async () => {
    const nc = await connectBus({
      servers: server.url,
      name: "no-beats",
      logger: silentLogger,
      user: NATS_USERS.tools.user,
      pass: NATS_USERS.tools.password,
    });
    try {
      const roll = await listenForWorkers(nc, new Subjects("agents"), 1_500, systemClock);
      expect(roll.workers).toEqual([]);
      expect(roll.refused).toMatch(/refused a subscription to 'agents\.workers\.beat\.\*'/);
      const supervisors = await callSupervisorRoll(nc, new Subjects("agents"), 1_500);
      expect(supervisors.supervisors).toEqual([]);
      expect(supervisors.refused).toMatch(/refused a publish to 'agents\.control\.ping'/);
      const critics = await callCriticRoll(nc, new Subjects("agents"), 1_500);
      expect(critics.critics).toEqual([]);
      expect(critics.refused).toMatch(/refused a publish to 'agents\.critic\.ping'/);
    } finally {
      await nc.close();
    }
  });

  it("actors that start before the supervisor wait for it, then serve", async () => {
    const log = await readFile(join(logDir, "agent-1.log"), "utf8");
    expect(log).toMatch(
      /waiting for a supervisor under AGENTS_PREFIX 'agents' with the same AGENTS_REPLICAS to provision them/,
    );
    expect(log).toMatch(/agent worker ready/);
  });

  it("a run commits end to end, submitted and inspected with agentctl's own user", async () => {
    const file = join(logDir, "run.json");
    await writeFile(
      file,
      JSON.stringify(
        spec({
          script: [
            { toolCalls: [{ name: "echo", input: { text: "secured" } }] },
            // A call with a side effect: its service keeps a record, which the retention removes.
            {
              toolCalls: [
                { name: "memory", input: { action: "remember", namespace: "secured", text: "All secured." } },
              ],
            },
            { toolCalls: [{ name: "finish", input: { answer: "All secured." } }] },
          ],
          tools: ["echo", "memory"],
          capabilities: ["compute", "memory"],
          verifiers: [],
          critic: { checks: [{ kind: "nonEmpty" }] },
        }),
      ),
    );
    const { stdout } = await cli("submit", file, "--run-id", "secured-1", "--watch");
    expect(stdout).toMatch(/committed/);
    const audit = await cli("audit", "tail", "secured-1", "--json");
    const kinds = audit.stdout
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as { kind: string }).kind);
    expect(kinds).toContain("tool.completed");
    expect(kinds.at(-1)).toBe("run.committed");
    // The audit subscriber the README gives, as agentctl's user: a durable consumer on the run log
    // that acks each message.
    const subscriber = await runProcess(process.execPath, [SUBSCRIBER, "secured-1", "--until-final"], {
      env: {
        ...process.env,
        NATS_URL: server.url,
        NATS_USER: NATS_USERS.cli.user,
        NATS_PASSWORD: NATS_USERS.cli.password,
      },
      timeout: 20_000,
    });
    expect(subscriber.stdout.trim().split("\n")).toHaveLength(kinds.length);
    // agentctl's user may halt and cancel a run, and the supervisor's hears it: a finished run's
    // halt and cancel are refused.
    const halt = await cli("halt", "secured-1").catch((err: { stdout: string; stderr: string }) => err);
    expect(halt.stderr).toMatch(/"code":"INVALID_INPUT".*cannot be halted: it is committed/);
    const cancel = await cli("cancel", "secured-1", "--reason", "r").catch(
      (err: { stdout: string; stderr: string }) => err,
    );
    expect(cancel.stderr).toMatch(/"code":"INVALID_INPUT".*cannot be cancelled: it is committed/);
  });

  it("agentctl's user replays a run that called a tool (asking the tool's service to describe it) and reads its result", async () => {
    const file = join(logDir, "asking.json");
    await writeFile(
      file,
      JSON.stringify(
        spec({
          script: [{ toolCalls: [{ name: "echo", input: { text: "held" } }] }, { text: "Ready to ship." }],
          tools: ["echo"],
          requiresApproval: true,
        }),
      ),
    );
    // Waiting for approval: submit --watch exits 4 (see WATCH_EXIT_CODES).
    const watched = await cli("submit", file, "--run-id", "asking-1", "--watch").then(
      () => ({ code: 0, stdout: "" }),
      (err: { code: number; stdout: string }) => err,
    );
    expect(watched.code).toBe(4);
    expect(watched.stdout).toMatch(/awaiting_approval[\s\S]*`agentctl approve asking-1`/);
    const replay = await cli("replay", "asking-1");
    expect(replay.stdout).toMatch(/transitions reproduced identically/);
    const early = await cli("result", "asking-1").catch((err: { stderr: string }) => err);
    expect(early.stderr).toMatch(/"code":"RUN_NOT_FINISHED".*a human decides it/);
    // Under another actor's user, agentctl says what refused it, not that the bus is down.
    const critic = await runProcess(process.execPath, [AGENTCTL, "approve", "asking-1"], {
      env: {
        ...process.env,
        NATS_URL: server.url,
        NATS_USER: "critic",
        NATS_PASSWORD: NATS_USERS.critic.password,
      },
    }).catch((err: { stderr: string }) => err);
    expect(critic.stderr).toMatch(
      /^\{"error":\{"code":"PERMISSION_DENIED","message":"the NATS server refused a publish to NATS user 'critic': /,
    );
    await cli("approve", "asking-1", "--by", "oncall");
    await until(async () => /^COMMIT/.test((await cli("result", "asking-1")).stdout), 10_000, {
      what: "asking-1's result",
      everyMs: 250,
    });
  });

  it("agentctl cluster asks every tool a run has listed to describe itself: one no service answers is a problem", async () => {
    const served = JSON.parse((await cli("cluster", "--json")).stdout) as ClusterHealth;
    expect(served.tools.tools).toEqual([
      { name: "echo", answered: true },
      { name: "memory", answered: true },
    ]);
    // A tool some run listed once, whose service is gone: the workers' shared descriptor outlives it.
    const agent = await connectBus({
      servers: server.url,
      name: "retired-tool",
      logger: silentLogger,
      user: NATS_USERS.agent.user,
      pass: NATS_USERS.agent.password,
    });
    try {
      const descriptors = await new Kvm(agent).open(new Subjects("agents").buckets().toolDescriptors);
      const echo = await descriptors.get("echo");
      await descriptors.put("retired", echo!.value);
      const report = await cli("cluster").catch((err: { stdout: string; code: number }) => err);
      expect(report.stdout).toMatch(/^tools: 2 of 3 served: echo, memory, retired \(no service\)$/m);
      expect(report.stdout).toMatch(
        /tool 'retired': no service answered its describe in 1\.5 s: started runs that call it wait for one and new runs start without it; start its service, or, if it was retired, delete its key from the agents-tool-descriptors bucket/,
      );
      expect((report as { code?: number }).code).toBe(1);
      await descriptors.delete("retired");
      const after = JSON.parse((await cli("cluster", "--json")).stdout) as ClusterHealth;
      expect(after.problems).toEqual([]);
    } finally {
      await agent.close();
    }
  });

  it("a model key echoed by the provider never reaches logs, audit events, statuses or replies", async () => {
    const file = await hostileSpec("leak.json", "PLANTED_MODEL_KEY");
    const submitted = await cli("submit", file, "--run-id", "leak-1", "--watch").catch(
      (err: { stdout: string; stderr: string }) => err,
    );
    // The provider did get the key (so a leak was possible) and the run failed on it.
    expect(seenKeys).toContain(`Bearer ${PLANTED}`);
    const status = await cli("status", "leak-1");
    expect(status.stdout).toMatch(/failed/);
    const audit = await cli("audit", "tail", "leak-1", "--json");
    expect(audit.stdout).toMatch(/authentication failed \(401\)/);
    const replay = await cli("replay", "leak-1").catch((err: { stdout: string; stderr: string }) => err);
    const logs = await Promise.all((await readdir(logDir)).map((f) => readFile(join(logDir, f), "utf8")));
    const everything = [submitted, status, audit, replay].flatMap((r) => [r.stdout, r.stderr]).concat(logs);
    expect(everything.join("\n")).toMatch(/REDACTED/);
    for (const text of everything) expect(text).not.toContain(PLANTED);
    for (const user of Object.values(NATS_USERS)) {
      for (const text of logs) expect(text).not.toContain(user.password);
    }
  });

  it("a spec naming another variable of the worker's environment as its model's key (its NATS password) fails, and nothing is sent", async () => {
    const file = await hostileSpec("steal.json", "NATS_PASSWORD");
    const asked = seenKeys.length;
    await cli("submit", file, "--run-id", "steal-1", "--watch").catch(() => undefined);
    const status = JSON.parse((await cli("status", "steal-1")).stdout) as {
      status: string;
      terminal?: object;
    };
    expect(status).toMatchObject({ status: "failed", terminal: { reason: "modelError" } });
    const failed = JSON.parse((await cli("result", "steal-1", "--json")).stdout) as object;
    expect(JSON.stringify(failed)).toMatch(
      /MODEL_KEY_DENIED.*apiKeyEnv 'NATS_PASSWORD' is not a variable this cluster keeps model keys in \(MODEL_KEY_ENVS: PLANTED_MODEL_KEY\)/,
    );
    // The provider was never asked.
    expect(seenKeys.length).toBe(asked);
    for (const user of Object.values(NATS_USERS)) expect(seenKeys.join("\n")).not.toContain(user.password);
  });

  it("the supervisor's retention, under its own user, removes a finished run's status, its calls' records and its tree's cap and counter; its log stays", async () => {
    const gone = async (): Promise<boolean> => {
      const status = await cli("status", "secured-1").catch((err: { stdout: string; stderr: string }) => err);
      return /"code":"NOT_FOUND".*its status was removed after the cluster's retention/.test(status.stderr);
    };
    await until(gone, 3 * RETAIN_MS, { what: "secured-1's status removed", everyMs: 250 });
    const log = await readFile(join(logDir, "supervisor.log"), "utf8");
    // Each removal is one the supervisor's NATS user may make: none was refused.
    expect(log).not.toMatch(/may not remove messages/);
    expect(log).toMatch(/"runId":"secured-1".*"toolRecords":[1-9].*finished run's tool records removed/);
    expect(log).toMatch(/"rootRunId":"secured-1".*finished run tree's budget removed/);
    expect(log).toMatch(/"runId":"secured-1".*finished run's status removed/);
    const replay = await cli("replay", "secured-1");
    expect(replay.stdout).toMatch(/transitions reproduced identically/);
    const audit = await cli("audit", "tail", "secured-1", "--json");
    expect(audit.stdout.trim().split("\n").at(-1)).toMatch(/"kind":"run.committed"/);
  });

  it("an actor whose user may not subscribe to its subjects (an AGENTS_PREFIX the permissions do not cover) stops, saying why, instead of running deaf", async () => {
    const refused = await runProcess(process.execPath, [actorEntry("supervisor")], {
      env: {
        ...process.env,
        NATS_URL: server.url,
        NATS_USER: NATS_USERS.supervisor.user,
        NATS_PASSWORD: NATS_USERS.supervisor.password,
        AGENTS_PREFIX: "team1",
        HEALTH_PORT: "0",
      },
      timeout: 30_000,
    }).then(
      () => ({ code: 0, stdout: "" }),
      (err: { code: number | null; stdout: string }) => err,
    );
    expect(refused.code).toBe(1);
    const fatal = refused.stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as { level: number; code?: string; msg: string })
      .find((line) => line.level === 60);
    expect(fatal).toMatchObject({
      code: "PERMISSION_DENIED",
      msg: expect.stringMatching(
        /refused this actor's subscription to 'team1\..+' \(NATS user supervisor, AGENTS_PREFIX 'team1'\)/,
      ) as unknown,
    });
  }, 40_000);
});
