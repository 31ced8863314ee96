import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { runProcess } from "../helpers/cluster-suite.js";
import { until } from "../helpers/until.js";

const dist = (path: string): string => fileURLToPath(new URL(`../../dist/services/${path}`, import.meta.url));

/**
 * `npm run cluster`, then agentctl as its banner prints it, from a newcomer's shell: no NATS_URL,
 * no login. The discovery file goes to a directory of this test's own.
 */
describe("npm run cluster, then agentctl as printed", () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const done of cleanup.reverse()) await done();
  });

  it("agentctl finds the local cluster with no NATS_URL and no login; the cluster's file goes when it stops", async () => {
    const dir = await mkdtemp(join(tmpdir(), "local-cluster-"));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, "local-cluster.json");
    const env: NodeJS.ProcessEnv = { ...process.env, AGENTS_LOCAL_CLUSTER_FILE: file };
    for (const name of ["NATS_URL", "NATS_USER", "NATS_PASSWORD", "AGENTS_PREFIX"]) delete env[name];
    const cluster = spawn(process.execPath, [dist("local/cluster-main.js")], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => cluster.once("exit", resolve));
    cleanup.push(async () => {
      if (cluster.exitCode === null) cluster.kill("SIGKILL");
      await exited;
    });
    let stdout = "";
    cluster.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    cluster.stderr.resume();
    await until(() => stdout.includes("Ctrl-C stops everything."), 60_000, { what: "the cluster's banner" });
    expect(stdout).toMatch(/\n {2}npm run agentctl -- submit examples\/hello\.json --watch\n/);
    expect(existsSync(file)).toBe(true);

    const agentctl = (...args: string[]) =>
      runProcess(process.execPath, [dist("cli/main.js"), ...args], { env, timeout: 60_000 });
    const submitted = await agentctl("submit", "examples/hello.json", "--watch");
    expect(submitted.stdout).toMatch(/committed/);
    const runs = await agentctl("runs", "--all", "--json");
    expect(runs.stdout).toMatch(/"status":"committed"/);

    cluster.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(existsSync(file)).toBe(false);
    // Without it (and with no server on NATS's default port), agentctl says no server answers.
    const after = await agentctl("runs").catch((err: { code: number; stderr: string }) => err);
    expect(after).toMatchObject({ code: 2 });
  }, 120_000);
});
