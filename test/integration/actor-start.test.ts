import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { connectBus } from "../../shared/bus/connect.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { actorEntry } from "../../services/local/cluster.js";
import { agentctlFails, runProcess } from "../helpers/cluster-suite.js";
import { startNats } from "../helpers/nats-server.js";
import { announcingServer } from "../helpers/old-server.js";

/** Runs the supervisor's process with `env` until it exits; its exit code and output. */
function supervisor(env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return runProcess(process.execPath, [actorEntry("supervisor")], {
    env: { ...process.env, HEALTH_PORT: "0", ...env },
  }).then(
    () => ({ code: 0, stdout: "", stderr: "" }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
}

const logLines = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { level: number; msg: string; code?: string; actor?: string });

describe("an actor that cannot start", () => {
  it("finding no server within NATS_CONNECT_WAIT_MS, says so in its log and exits 1, no stack trace", async () => {
    const gone = await startNats({ own: true });
    await gone.stop();
    const ran = await supervisor({ NATS_URL: gone.url, NATS_CONNECT_WAIT_MS: "1500" });
    expect(ran.code).toBe(1);
    expect(ran.stderr).toBe("");
    const lines = logLines(ran.stdout);
    expect(lines[0]).toMatchObject({ level: 40, msg: "no NATS server answers yet: waiting for one" });
    expect(lines.at(-1)).toMatchObject({ level: 60, code: "BUS_UNAVAILABLE" });
    expect(lines.at(-1)?.msg).toMatch(/^stopping: no NATS server answers at /);
  });

  it("on a server where its user's account has no JetStream, says what to change (BUS_UNAVAILABLE) and exits 1; so does agentctl, at once", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nojs-"));
    const configFile = join(dir, "nats.conf");
    await writeFile(configFile, "accounts { PLAIN: { users: [ { user: plain, password: plain } ] } }\n");
    await using server = await startNats({ configFile });
    const user = { NATS_URL: server.url, NATS_USER: "plain", NATS_PASSWORD: "plain" };
    const ran = await supervisor(user);
    expect(ran.code).toBe(1);
    const last = logLines(ran.stdout).at(-1);
    expect(last).toMatchObject({ level: 60, code: "BUS_UNAVAILABLE" });
    expect(last?.msg).toMatch(
      /has no JetStream for this connection .*start it with -js.*enable JetStream for the NATS user's account/,
    );
    // It printed its error and then hung on the connection it had left open.
    const began = Date.now();
    const cli = await agentctlFails({ env: () => ({ ...process.env, ...user }) }, ["runs"]);
    expect(Date.now() - began).toBeLessThan(5_000);
    expect(cli).toMatchObject({ code: 2, error: { code: "BUS_UNAVAILABLE" } });
    await rm(dir, { recursive: true, force: true });
  });

  it("on a nats-server older than 2.12, logs one fatal line naming its version, the minimum and where to get one (UNSUPPORTED_SERVER); so does agentctl", async () => {
    await using old = await announcingServer("2.9.10");
    const ran = await supervisor({ NATS_URL: old.url, NATS_CONNECT_WAIT_MS: "0" });
    expect(ran.code).toBe(1);
    const lines = logLines(ran.stdout);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 60, code: "UNSUPPORTED_SERVER", actor: "supervisor" });
    expect(lines[0]?.msg).toMatch(
      /nats-server 2\.9\.10 at .* is older than 2\.12\.0.*Debian.*nats:2\.15\.1-alpine/,
    );
    const cli = await agentctlFails({ env: () => ({ ...process.env, NATS_URL: old.url }) }, ["runs"]);
    expect(cli).toMatchObject({ code: 2, error: { code: "UNSUPPORTED_SERVER" } });
  });

  it("with invalid settings, logs one fatal line listing every problem (INVALID_INPUT) and exits 1", async () => {
    const ran = await supervisor({ SUPERVISOR_POOL_CAPACITY: "many", NATS_CONNECT_WAIT_MS: "-1" });
    expect(ran.code).toBe(1);
    expect(ran.stderr).toBe("");
    const lines = logLines(ran.stdout);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 60, code: "INVALID_INPUT", actor: "supervisor" });
    expect(lines[0]?.msg).toMatch(/SUPERVISOR_POOL_CAPACITY/);
    expect(lines[0]?.msg).toMatch(/NATS_CONNECT_WAIT_MS/);
  });

  it("asked for AGENTS_REPLICAS=3 of a server not in a cluster, says so (INVALID_INPUT) and exits 1, creating nothing; so does agentctl", async () => {
    // A server of its own: NATS_URL may name a cluster.
    await using single = await startNats({ own: true });
    const env = { NATS_URL: single.url, AGENTS_REPLICAS: "3" };
    const ran = await supervisor(env);
    expect(ran.code).toBe(1);
    const last = logLines(ran.stdout).at(-1);
    expect(last).toMatchObject({ level: 60, code: "INVALID_INPUT", actor: "supervisor" });
    expect(last?.msg).toMatch(/AGENTS_REPLICAS is 3 and the NATS server at .* is not in a cluster/);
    const cli = await agentctlFails({ env: () => ({ ...process.env, ...env }) }, ["runs"]);
    expect(cli).toMatchObject({ code: 2, error: { code: "INVALID_INPUT" } });
    const bare = await connectBus({ servers: single.url, name: "actor-start", logger: silentLogger });
    expect(await (await jetstreamManager(bare)).streams.names().next()).toEqual([]);
    await bare.close();
  });

  it("with statuses kept as long as the run log keeps messages, whoever set its max_age, logs why and exits 1", async () => {
    const server = await startNats();
    try {
      const base = {
        NATS_URL: server.url,
        AGENTS_PREFIX: `keep${process.pid}x${Date.now().toString(36)}`,
        ...(server.user ? { NATS_USER: server.user, NATS_PASSWORD: server.pass ?? "" } : {}),
      };
      // Its own SUPERVISOR_LOG_MAX_AGE_MS sets the stream's max_age, then refuses it.
      const ran = await supervisor({
        ...base,
        SUPERVISOR_LOG_MAX_AGE_MS: "600000",
        SUPERVISOR_STATUS_RETAIN_MS: "600000",
      });
      expect(ran.code).toBe(1);
      const last = logLines(ran.stdout).at(-1);
      expect(last).toMatchObject({ level: 60, code: "INVALID_INPUT" });
      expect(last?.msg).toMatch(/keeps messages 600000 ms .*no longer than SUPERVISOR_STATUS_RETAIN_MS/);
      // A later one whose env leaves the stream as it is: what the stream keeps is what counts.
      const again = await supervisor({ ...base, SUPERVISOR_STATUS_RETAIN_MS: "900000" });
      expect(again.code).toBe(1);
      expect(logLines(again.stdout).at(-1)?.msg).toMatch(/keeps messages 600000 ms/);
    } finally {
      await server.stop();
    }
  }, 30_000);
});
