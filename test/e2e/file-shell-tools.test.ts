import { chmodSync, existsSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { idempotencyBucketKey, IdempotencyRecord } from "../../shared/bus/idempotency-record.js";
import { decode } from "../../shared/bus/codec.js";
import type { CapabilityObject } from "../../shared/contracts/capability.js";
import { settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { detachingScript, sleeping, sleepMarker } from "../helpers/processes.js";
import { until } from "../helpers/until.js";

/**
 * The file and shell tools served by a tools actor, on a cluster: a run reads and writes files in
 * a temporary directory and runs a granted command there; refused calls are `tool.denied` in the
 * run's log and the run goes on. The runs are `sovereign` (the default): local tools are allowed.
 */
const base = mkdtempSync(join(tmpdir(), "file-shell-tools-"));
const work = join(base, "work");
const outside = join(base, "outside");
mkdirSync(work);
mkdirSync(outside);
// Under root the commands run as nobody: the directories must let them in.
chmodSync(base, 0o755);
chmodSync(work, 0o777);
writeFileSync(join(outside, "secret.txt"), "secret");
symlinkSync(outside, join(work, "out-dir"));
const isRoot = process.getuid?.() === 0;
if (!isRoot) console.warn("\n*** not root: a tools actor killed mid-command is NOT tested in this run ***\n");

const suite = useClusterSuite("fileshell", {
  actors: [
    { kind: "supervisor" },
    {
      kind: "tools",
      env: {
        TOOLS: "file_read,file_write,file_list,shell",
        TOOLS_SHELL_ROOTS: work,
        TOOLS_SHELL_TIMEOUT_MS: "5000",
        // Not root, commands run as the actor itself: the tests accept that.
        ...(isRoot ? {} : { TOOLS_SHELL_SAME_USER: "true" }),
      },
    },
    { kind: "agent", name: "agent-1" },
  ],
});

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

const grants: CapabilityObject[] = [
  { kind: "fileRead", allowedPaths: [work] },
  { kind: "fileWrite", allowedPaths: [work] },
  { kind: "shell", allowedCommands: ["wc", "id"] },
];
const call = (name: string, input: Record<string, unknown>) => ({ toolCalls: [{ name, input }] });

describe("file and shell tools on a cluster", () => {
  it("a run writes a file, reads it back and runs a granted command on it, in a temporary directory", async () => {
    const { runId } = await suite.client.submit(
      spec({
        script: [
          call("file_write", { path: "notes.txt", content: "hello from the agent\n" }),
          call("file_read", { path: join(work, "notes.txt") }),
          call("file_list", { path: "." }),
          call("shell", { command: "wc", args: ["-c", "notes.txt"] }),
          call("shell", { command: "id", args: ["-u"] }),
          { text: "wrote, read, listed and counted" },
        ],
        tools: ["file_write", "file_read", "file_list", "shell"],
        capabilities: grants,
      }),
    );
    expect(await suite.waitFor(runId, settled, 20_000)).toMatchObject({ status: "committed" });
    expect(await readFile(join(work, "notes.txt"), "utf8")).toBe("hello from the agent\n");
    const outputs = (await suite.wal(runId)).flatMap((r) =>
      r.record.type === "COMPLETE" ? [r.record.event.output] : [],
    );
    expect(outputs).toEqual([
      { path: join(work, "notes.txt"), bytes: 21, sha256: expect.any(String) as string },
      expect.objectContaining({ content: "hello from the agent\n", truncated: false }),
      {
        path: work,
        entries: [
          { name: "notes.txt", type: "file" },
          { name: "out-dir", type: "symlink" },
        ],
        truncated: false,
      },
      { exitCode: 0, stdout: "21 notes.txt\n", stderr: "", truncated: false },
      expect.objectContaining({ exitCode: 0 }),
    ]);
    // Run as nobody when the tools actor is root, as itself otherwise.
    const uid = process.getuid?.() === 0 ? "65534" : String(process.getuid?.());
    expect((outputs[4] as { stdout: string }).stdout.trim()).toBe(uid);
    // A command is not idempotent: the service recorded each call, so a retry cannot run it again.
    const audit = await suite.audit(runId);
    const shellIntents = audit.filter((e) => e.kind === "tool.intent" && e.actor === "tool:shell");
    expect(shellIntents).toHaveLength(2);
    for (const intent of shellIntents) {
      const key = idempotencyBucketKey("shell", String(intent.data?.["idempotencyKey"]));
      const entry = await suite.bus.buckets.idempotency.get(key);
      expect(entry && decode(IdempotencyRecord, entry.value)).toMatchObject({ status: "done" });
    }
  }, 30_000);

  it("refused calls are tool.denied in the run's log with the reason; the model is told and the run commits", async () => {
    const { runId } = await suite.client.submit(
      spec({
        script: [
          call("file_read", { path: "../outside/secret.txt" }),
          call("file_write", { path: "out-dir/planted.txt", content: "x" }),
          call("file_read", { path: join(outside, "secret.txt") }),
          call("shell", { command: "rm", args: ["-rf", outside] }),
          call("shell", { command: "wc notes.txt; rm -rf /", args: [] }),
          call("shell", { command: "$(rm -rf /)", args: [] }),
          { text: "every escape was refused" },
        ],
        tools: ["file_write", "file_read", "shell"],
        capabilities: grants,
      }),
    );
    expect(await suite.waitFor(runId, settled, 20_000)).toMatchObject({ status: "committed" });
    const audit = await suite.audit(runId);
    const denied = audit.filter((e) => e.kind === "tool.denied");
    expect(denied.map((e) => [e.actor, e.data?.["code"]])).toEqual([
      ["tool:file_read", "PATH_NOT_ALLOWED"],
      ["tool:file_write", "PATH_NOT_ALLOWED"],
      ["tool:file_read", "PATH_NOT_ALLOWED"],
      ["tool:shell", "COMMAND_NOT_ALLOWED"],
      ["tool:shell", "COMMAND_NOT_ALLOWED"],
      ["tool:shell", "COMMAND_NOT_ALLOWED"],
    ]);
    expect(denied[0]?.reason).toMatch(/outside the granted paths/);
    expect(denied[1]?.reason).toContain(`leads to '${join(outside, "planted.txt")}'`);
    expect(denied[3]?.reason).toMatch(/is not in allowed_commands/);
    expect(denied[4]?.reason).toMatch(/never a shell string/);
    expect(audit.filter((e) => e.kind === "tool.aborted")).toEqual([]);
    expect(await readdir(outside)).toEqual(["secret.txt"]);
  }, 30_000);

  it("a grant with a relative allowedPaths entry (fileRead, fileWrite, mcp) is refused at submit with INVALID_SPEC naming each field", async () => {
    await expect(
      suite.client.submit(
        spec({
          tools: ["file_read"],
          capabilities: [
            { kind: "fileRead", allowedPaths: [work, "work"] },
            { kind: "fileWrite", allowedPaths: ["~/out"] },
            { kind: "mcp", server: "fs", tool: "*", allowedPaths: ["data"] },
          ],
        }),
      ),
    ).rejects.toMatchObject({
      code: "INVALID_SPEC",
      message: expect.stringMatching(
        /^agent\.capabilities\[0\]\.allowedPaths\[1\] 'work', agent\.capabilities\[1\]\.allowedPaths\[0\] '~\/out', agent\.capabilities\[2\]\.allowedPaths\[0\] 'data': an allowedPaths entry must be an absolute path/,
      ) as string,
    });
  }, 30_000);

  it("the review's escapes: another name of one executable, the kernel's files, a non-zero exit answered, a setsid that would outlive its call", async () => {
    const detached = sleepMarker();
    const { runId } = await suite.client.submit(
      spec({
        script: [
          // /usr/bin/awk leads to mawk: the same file, another name.
          call("shell", { command: "awk", args: ["BEGIN { print 1 }"] }),
          call("file_read", { path: "/proc/self/environ" }),
          call("file_list", { path: "/proc/1" }),
          call("shell", { command: "grep", args: ["-q", "no-such-line", "/etc/passwd"] }),
          call("shell", { command: "sh", args: ["-c", detachingScript(detached)] }),
          { text: "done" },
        ],
        tools: ["file_read", "file_list", "shell"],
        capabilities: [
          { kind: "fileRead", allowedPaths: ["*"] },
          { kind: "shell", allowedCommands: ["mawk", "grep", "sh"] },
        ],
      }),
    );
    expect(await suite.waitFor(runId, settled, 20_000)).toMatchObject({ status: "committed" });
    const audit = await suite.audit(runId);
    expect(audit.filter((e) => e.kind === "tool.denied").map((e) => [e.actor, e.data?.["code"]])).toEqual([
      ["tool:shell", "COMMAND_NOT_ALLOWED"],
      ["tool:file_read", "PATH_NOT_ALLOWED"],
      ["tool:file_list", "PATH_NOT_ALLOWED"],
    ]);
    const outputs = (await suite.wal(runId)).flatMap((r) =>
      r.record.type === "COMPLETE" ? [r.record.event.output] : [],
    );
    expect(outputs).toEqual([
      { exitCode: 1, stdout: "", stderr: "", truncated: false },
      { exitCode: 0, stdout: "started\n", stderr: "", truncated: false },
    ]);
    // Under root the command ran in a PID namespace of its own: what it detached died with it.
    if (isRoot) expect(await sleeping(detached)).toEqual([]);
  }, 30_000);

  it("a tools actor that would run commands as itself (here TOOLS_SHELL_UID=0 under root) refuses to start, naming TOOLS_SHELL_SAME_USER", async () => {
    await expect(
      suite.cluster.launch({
        kind: "tools",
        name: "tools-same-user",
        env: { TOOLS: "shell", TOOLS_SHELL_ROOTS: work, ...(isRoot ? { TOOLS_SHELL_UID: "0" } : {}) },
      }),
    ).rejects.toThrow(/TOOLS_SHELL_SAME_USER=true/);
  }, 30_000);

  // Last: it kills the suite's tools actor.
  it.runIf(isRoot)(
    "a tools actor killed with SIGKILL mid-command leaves nothing of the command running",
    async () => {
      const [detached, waiting] = [sleepMarker(), sleepMarker()];
      await suite.client.submit(
        spec({
          script: [
            call("shell", { command: "sh", args: ["-c", `${detachingScript(detached)}; sleep ${waiting}`] }),
            { text: "never reached" },
          ],
          tools: ["shell"],
          capabilities: [{ kind: "shell", allowedCommands: ["sh"] }],
        }),
      );
      const running = async (): Promise<number> =>
        (await sleeping(detached)).length + (await sleeping(waiting)).length;
      // The detached sleep has left the command's process group once its file is there.
      await until(() => existsSync(join(work, `${detached}.ready`)), 10_000, { what: "the detached sleep" });
      expect(await sleeping(detached)).not.toEqual([]);
      const tools = suite.cluster.actors.get("tools");
      suite.cluster.signal("tools", "SIGKILL");
      await tools?.exited;
      await until(async () => (await running()) === 0, 10_000, { what: "the command's sleeps gone" });
    },
    30_000,
  );
});
