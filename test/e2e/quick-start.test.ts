import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runProcess } from "../helpers/cluster-suite.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";

/** The README's first commands, as built: `npm start`, `npm run demo:trading`, `npm run demo:inprocess`. */
const entry = (name: string): string =>
  fileURLToPath(
    new URL(`../../dist/${name.includes("/") ? name : `services/local/${name}`}.js`, import.meta.url),
  );

/**
 * A newcomer's environment: no NATS_URL (the command starts nats-server itself, with nats.conf),
 * no credentials, no prefix. `over` adds to it.
 */
function newcomerEnv(over: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ["NATS_URL", "NATS_USER", "NATS_PASSWORD", "AGENTS_PREFIX"]) delete env[name];
  return { ...env, ...over };
}

/** Runs a command to its end: its exit code and what it printed. */
async function run(
  name: string,
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return runProcess(process.execPath, [entry(name)], { env, timeout: 90_000 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
}

/** Whether process `pid` is gone. */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

describe("npm start", () => {
  it("starts nats-server and a cluster, takes the sample run through the critic's refusal and a repair to its commit, and stops everything", async () => {
    const { code, stdout, stderr } = await run("start", newcomerEnv());
    expect(code, stderr).toBe(0);
    // The server it started is one the contract runs on (2.12 or newer), and it says which.
    const natsPid = Number(/local nats-server v2\.(?:1[2-9]|[2-9]\d)\.\d+ \(pid (\d+)\)/.exec(stdout)?.[1]);
    expect(natsPid).toBeGreaterThan(0);
    expect(stdout).toMatch(/actors: supervisor, tools, critic, agent-1, agent-2/);
    // The trail, in order: the critic sends the first answer back, the run repairs, then commits.
    const kinds = [...stdout.matchAll(/#\s*\d+\s+\S+\s+(\S+)\s+(\S+)/g)].map(
      ([, kind, status]) => `${kind} ${status}`,
    );
    expect(kinds[0]).toBe("run.admitted passed");
    const refused = kinds.indexOf("critic.verdict failed");
    expect(refused).toBeGreaterThan(0);
    expect(kinds.indexOf("repair.started started")).toBeGreaterThan(refused);
    expect(kinds.at(-1)).toBe("run.committed passed");
    expect(stdout).toMatch(/result: committed/);
    expect(stdout).toMatch(/"diagnosis": "high safetyViolation: the answer includes a raw credential/);
    expect(stdout).toMatch(/done in [\d.]+ s; everything stopped/);
    // What to do next points at a cluster that stays up, not at the run in the store just removed.
    expect(stdout).toMatch(/next: `npm run cluster` keeps a cluster up/);
    expect(stdout).not.toMatch(/audit tail run-/);
    expect(gone(natsPid)).toBe(true);
    // Its actors' logs, kept only when something fails.
    const logDir = /\(logs in (\S+), removed if all goes well\)/.exec(stdout)?.[1] ?? "";
    expect(logDir).toMatch(/agents-cluster-/);
    expect(existsSync(logDir)).toBe(false);
  }, 120_000);

  it("with an AGENTS_PREFIX the local nats-server's users may not use: refused at once, saying what to do (before, its actors were refused their subjects and the run was never served)", async () => {
    const { code, stdout, stderr } = await run("start", newcomerEnv({ AGENTS_PREFIX: "team1" }));
    expect(code).toBe(1);
    expect(stderr).toMatch(/^INVALID_INPUT: AGENTS_PREFIX 'team1': .*unset AGENTS_PREFIX, or set NATS_URL/m);
    expect(stdout).not.toMatch(/submitted run/);
    expect(stdout).toMatch(/failed after [\d.]+ s; everything stopped/);
  }, 120_000);

  it("with an actor that cannot start (a tool service given a tool it does not have): fails, saying why, and keeps the actors' logs, saying where", async () => {
    const { code, stdout, stderr } = await run("start", newcomerEnv({ TOOLS: "bogus" }));
    expect(code).toBe(1);
    expect(stderr).toMatch(/^INTERNAL: tools exited with code 1 before it was ready/m);
    const logDir = /the actors' logs are kept in (\S+)/.exec(stdout)?.[1] ?? "";
    try {
      expect(readFileSync(join(logDir, "tools.log"), "utf8")).toMatch(/invalid configuration: TOOLS/);
      expect(stdout).toMatch(/failed after [\d.]+ s; everything stopped/);
    } finally {
      if (logDir) rmSync(logDir, { recursive: true, force: true });
    }
  }, 120_000);

  describe("on a NATS server of yours (NATS_URL) under a prefix of yours", () => {
    let server: TestNats;
    beforeAll(async () => {
      server = await startNats({ own: true });
    }, 30_000);
    afterAll(async () => {
      await server?.stop();
    });

    it("the actors and the sample run's client share the prefix, and the run commits (before, the client asked under the default prefix, which nobody served)", async () => {
      const env = newcomerEnv({
        NATS_URL: server.url,
        AGENTS_PREFIX: `qs${process.pid}`,
        ...(server.user ? { NATS_USER: server.user, NATS_PASSWORD: server.pass ?? "" } : {}),
      });
      const { code, stdout, stderr } = await run("start", env);
      expect(code, stderr).toBe(0);
      expect(stdout).toMatch(`NATS: NATS_URL ${server.url}`);
      expect(stdout).toMatch(/result: committed/);
    }, 120_000);
  });
});

describe("npm run demo:trading", () => {
  it("trades its 30 ticks on a local cluster, every tick settled, and prints the book", async () => {
    const { code, stdout, stderr } = await run("examples/trading/demo", newcomerEnv());
    expect(code, stderr).toBe(0);
    const ticks = stdout.split("\n").filter((line) => /^t-\d{3} /.test(line));
    expect(ticks).toHaveLength(30);
    const counted = [...stdout.matchAll(/^\| ticks \S+ \| (\d+) \|$/gm)].reduce(
      (n, [, c]) => n + Number(c),
      0,
    );
    expect(counted).toBe(30);
    expect(stdout).toMatch(/^\| kill switch \| (off|ON) \|$/m);
  }, 120_000);
});

describe("npm run demo:inprocess", () => {
  it("runs the sample run in one process, without NATS, to its commit", async () => {
    const { code, stdout, stderr } = await run("demo", newcomerEnv());
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(/critic\.verdict\s+failed/);
    expect(stdout).toMatch(/^run \S+: committed \(quality gates passed/m);
  }, 60_000);
});
