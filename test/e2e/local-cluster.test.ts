import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { runProcess } from "../helpers/cluster-suite.js";
import { until } from "../helpers/until.js";

/** The README's tour: each `npm run agentctl -- …` line, its arguments, and the exit code it names. */
function readmeTour(): { line: string; args: string[]; exits: number }[] {
  const readme = readFileSync(fileURLToPath(new URL("../../README.md", import.meta.url)), "utf8");
  const block = /<!-- tour:begin -->([\s\S]*?)<!-- tour:end -->/.exec(readme)?.[1] ?? "";
  return block
    .split("\n")
    .filter((line) => line.startsWith("npm run agentctl -- "))
    .map((line) => {
      const [command = "", comment = ""] = line.split(/\s+#\s+/);
      const words = [...command.slice("npm run agentctl -- ".length).matchAll(/"([^"]*)"|(\S+)/g)];
      const exits = Number(/exits (\d)/.exec(comment)?.[1] ?? 0);
      return { line, args: words.map(([, quoted, bare]) => quoted ?? bare ?? ""), exits };
    });
}

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

  it("the README's tour runs as printed: agentctl finds the local cluster with no NATS_URL and no login; the cluster's file goes when it stops", async () => {
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
    // The web console, as the banner prints it: on loopback, read without a token, operated with its own.
    const consoleUrl = /\nweb console: (http:\/\/127\.0\.0\.1:\d+\/)\n/.exec(stdout)?.[1] ?? "";
    const operateToken = /its operate token \([^)]*\): (\S+)/.exec(stdout)?.[1] ?? "";
    expect(consoleUrl, stdout).not.toBe("");
    const who = await fetch(new URL("api/whoami", consoleUrl), {
      headers: { "x-operate-token": operateToken },
    });
    expect(await who.json()).toEqual({ operate: true, operateConfigured: true });

    const agentctl = (...args: string[]) =>
      runProcess(process.execPath, [dist("cli/main.js"), ...args], { env, timeout: 60_000 }).then(
        (done) => ({ code: 0, ...done }),
        (err: { code: number; stdout: string; stderr: string }) => err,
      );
    // The README's tour, every line as printed, each with the exit code its comment names (0 else).
    const tour = readmeTour();
    expect(tour.length).toBeGreaterThanOrEqual(10);
    for (const { line, args, exits } of tour) {
      const { code, stdout, stderr } = await agentctl(...args);
      expect({ line, code, stderr }).toEqual({ line, code: exits, stderr: "" });
      expect(stdout.length, line).toBeGreaterThan(0);
    }
    // Every shipped example the tour does not run commits, as submitted and watched from here; but
    // local-model.json, which asks a model server on the user's machine (local-model.test.ts serves it).
    const toured = new Set([
      ...tour.flatMap(({ args }) => args.filter((a) => a.startsWith("examples/"))),
      "examples/local-model.json",
    ]);
    const examples = (await readdir("examples")).filter((f) => f.endsWith(".json"));
    for (const name of examples.filter((f) => !toured.has(`examples/${f}`))) {
      const { code, stdout } = await agentctl("submit", `examples/${name}`, "--watch");
      expect({ name, code }).toEqual({ name, code: 0 });
      expect(stdout, name).toMatch(/committed/);
    }
    expect(examples.length).toBeGreaterThanOrEqual(4);
    const runs = await agentctl("runs", "--all", "--json");
    expect(runs.stdout).toMatch(
      /"runId":"hello-1"[^}]*"status":"committed"|"status":"committed"[^}]*"runId":"hello-1"/,
    );

    const listed = await fetch(new URL("api/runs?q=hello-1", consoleUrl));
    expect(await listed.json()).toMatchObject({ runs: [{ runId: "hello-1", status: "committed" }] });
    // Under its own NATS user it hears the rolls, and operates (the kill switch, on and off).
    const health = (await (await fetch(new URL("api/cluster", consoleUrl))).json()) as {
      health: { supervisors: { refused?: string }; workers: { refused?: string; workers: unknown[] } };
    };
    expect(health.health.supervisors.refused).toBeUndefined();
    expect(health.health.workers).toMatchObject({ workers: [{}, {}] });
    for (const active of [true, false]) {
      const switched = await fetch(new URL("api/operate/killswitch", consoleUrl), {
        method: "POST",
        headers: { "x-operate-token": operateToken, "content-type": "application/json" },
        body: JSON.stringify({ active, by: "tester", reason: "checking the console's user" }),
      });
      expect(switched.status, await switched.clone().text()).toBe(200);
    }

    cluster.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(existsSync(file)).toBe(false);
    // Without it (and with no server on NATS's default port), agentctl says no server answers.
    expect(await agentctl("runs")).toMatchObject({ code: 2 });
  }, 120_000);
});
