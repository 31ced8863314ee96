import { spawn } from "node:child_process";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolsEnv } from "../../services/tools/env.js";
import { parseEnv } from "../../shared/runtime/config.js";
import { commandShape, findExecutable, grantedExecutable } from "../../shared/tools/builtin/command-grant.js";
import {
  inPidNamespace,
  probePidNamespace,
  type PidNamespace,
} from "../../shared/tools/builtin/pid-namespace.js";
import {
  createShellTool,
  MAX_COMMAND_OUTPUT_BYTES,
  NOBODY,
  shellIdentity,
  type ShellConfig,
} from "../../shared/tools/builtin/shell.js";
import { authorizeTool } from "../../shared/tools/capabilities.js";
import { localToolProblem } from "../../services/agent/local-tools.js";
import { toolCtx } from "../helpers/fixtures.js";
import { detachingScript, sleeping, sleepMarker } from "../helpers/processes.js";

let base: string;
let root: string;
let outside: string;
let config: ShellConfig;
let pidNamespace: PidNamespace | undefined;
const isRoot = process.getuid?.() === 0;
if (!isRoot) console.warn("\n*** not root: running commands as another user is NOT tested in this run ***\n");

const run = (allowedCommands: string[], input: Record<string, unknown>, signal?: AbortSignal) => {
  const tool = createShellTool(config);
  return tool.execute(tool.input.parse(input), {
    ...toolCtx({ kind: "shell", allowedCommands }),
    ...(signal ? { signal } : {}),
  });
};
const notAllowed = { code: "COMMAND_NOT_ALLOWED" };

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), "shell-tool-"));
  root = join(base, "work");
  outside = join(base, "outside");
  await mkdir(root);
  await mkdir(outside);
  // Commands run as nobody when the tests run as root: the directories must let them in.
  await chmod(base, 0o755);
  await chmod(root, 0o777);
  await symlink(outside, join(root, "out-dir"));
  await symlink("/usr/bin/touch", join(root, "echo"));
  const self =
    process.getuid && process.getgid ? { uid: process.getuid(), gid: process.getgid() } : undefined;
  // Not root: the tests run commands as themselves, as TOOLS_SHELL_SAME_USER=true allows.
  const identity = shellIdentity({}, self, true);
  config = { roots: [root], maxTimeoutMs: 10_000, ...(identity ? { identity } : {}) };
  const probed = identity ? await probePidNamespace(identity) : undefined;
  pidNamespace = probed && !("unavailable" in probed) ? probed : undefined;
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe("the shell tool's command check", () => {
  it("a command name with shell syntax is no program name: `;`, `$(…)`, backticks, `&&`, `|`, spaces, quotes", () => {
    const syntax = fc.constantFrom(..." ;|&$`()<>\n\"'*?~{}#\\=!");
    fc.assert(
      fc.property(fc.string(), syntax, fc.string(), (before, bad, after) => {
        expect(commandShape(`${before}${bad}${after}`)).toBeDefined();
      }),
    );
    expect(commandShape("git")).toBeUndefined();
    expect(commandShape("/usr/bin/git")).toBeUndefined();
    expect(commandShape("./echo")).toMatch(/relative path/);
    expect(commandShape("bin/echo")).toMatch(/relative path/);
  });

  it("matches by the resolved executable: another name of a granted program runs, a symlink to an ungranted one does not", async () => {
    const { real: echo } = await grantedExecutable("echo", ["echo"]);
    expect(await grantedExecutable("/bin/echo", ["echo"])).toMatchObject({ real: echo, path: "/bin/echo" });
    expect(await grantedExecutable("echo", ["/usr/bin/echo"])).toMatchObject({ real: echo });
    await expect(grantedExecutable(join(root, "echo"), ["echo"])).rejects.toMatchObject(notAllowed);
    await expect(grantedExecutable("no-such-program", ["*"])).rejects.toMatchObject({ code: "NOT_FOUND" });
    expect(await grantedExecutable("touch", ["*"])).toEqual(await grantedExecutable("touch", ["touch"]));
  });

  it("escape: a multi-call binary's other name is another program: two links to one file grant only the name granted", async () => {
    // BusyBox: `wc` and `sh` link to one executable, which does what the name it runs as says.
    const bin = join(base, "multi-bin");
    await mkdir(bin);
    await writeFile(join(bin, "busybox"), "#!/bin/sh\n", { mode: 0o755 });
    await symlink(join(bin, "busybox"), join(bin, "wc"));
    await symlink(join(bin, "busybox"), join(bin, "sh"));
    expect(await grantedExecutable("wc", ["wc"], bin)).toEqual({
      path: join(bin, "wc"),
      real: join(bin, "busybox"),
    });
    expect(await grantedExecutable(join(bin, "wc"), ["wc"], bin)).toMatchObject({ path: join(bin, "wc") });
    expect(await grantedExecutable("wc", [join(bin, "wc")], bin)).toMatchObject({ path: join(bin, "wc") });
    for (const command of ["sh", join(bin, "sh"), join(bin, "busybox"), "busybox"])
      await expect(grantedExecutable(command, ["wc"], bin), command).rejects.toMatchObject(notAllowed);
    await expect(grantedExecutable("sh", [join(bin, "wc")], bin)).rejects.toMatchObject({
      message: expect.stringContaining("no entry names it") as string,
    });
  });

  it("whom commands run as: nobody under root unless configured; any other user runs them as itself and refuses another id", () => {
    expect(shellIdentity({}, { uid: 0, gid: 0 })).toEqual({ uid: NOBODY, gid: NOBODY });
    expect(shellIdentity({ uid: 1000, gid: 1000 }, { uid: 0, gid: 0 })).toEqual({ uid: 1000, gid: 1000 });
    expect(shellIdentity({}, { uid: 1000, gid: 100 }, true)).toBeUndefined();
    expect(shellIdentity({ uid: 1000 }, { uid: 1000, gid: 100 }, true)).toBeUndefined();
    expect(() => shellIdentity({ uid: 0 }, { uid: 1000, gid: 100 }, true)).toThrow(
      expect.objectContaining({ code: "INVALID_INPUT" }),
    );
    expect(shellIdentity({}, undefined, true)).toBeUndefined();
    expect(shellIdentity({ uid: 0 }, { uid: 0, gid: 0 }, true)).toEqual({ uid: 0, gid: NOBODY });
  });

  it("escape: commands run as the actor's own user (which can read its credentials) are refused at start unless TOOLS_SHELL_SAME_USER=true", () => {
    const sameUser = expect.objectContaining({
      code: "INVALID_INPUT",
      message: expect.stringContaining("TOOLS_SHELL_SAME_USER=true") as string,
    }) as Error;
    expect(() => shellIdentity({}, { uid: 1000, gid: 100 })).toThrow(sameUser);
    expect(() => shellIdentity({ uid: 1000 }, { uid: 1000, gid: 100 })).toThrow(sameUser);
    expect(() => shellIdentity({ uid: 0 }, { uid: 0, gid: 0 })).toThrow(sameUser);
    expect(() => shellIdentity({}, undefined)).toThrow(sameUser);
    const env = { NATS_URL: "nats://127.0.0.1:4222", TOOLS: "shell", TOOLS_SHELL_ROOTS: "/srv" };
    expect(parseEnv(ToolsEnv, env).TOOLS_SHELL_SAME_USER).toBe(false);
    expect(parseEnv(ToolsEnv, { ...env, TOOLS_SHELL_SAME_USER: "true" }).TOOLS_SHELL_SAME_USER).toBe(true);
    expect(() => parseEnv(ToolsEnv, { ...env, TOOLS_SHELL_SAME_USER: "yes" })).toThrow(
      /TOOLS_SHELL_SAME_USER/,
    );
  });

  it("TOOLS: file and shell tools only when named; shell needs TOOLS_SHELL_ROOTS (absolute)", () => {
    const env = { NATS_URL: "nats://127.0.0.1:4222" };
    expect(parseEnv(ToolsEnv, env).TOOLS).toEqual(["echo", "http_fetch", "memory"]);
    expect(() => parseEnv(ToolsEnv, { ...env, TOOLS: "shell" })).toThrow(/TOOLS_SHELL_ROOTS/);
    expect(() => parseEnv(ToolsEnv, { ...env, TOOLS: "shell", TOOLS_SHELL_ROOTS: "work" })).toThrow(
      /absolute directory/,
    );
    expect(
      parseEnv(ToolsEnv, { ...env, TOOLS: "shell,file_read", TOOLS_SHELL_ROOTS: "/srv/a, /srv/b" }),
    ).toMatchObject({
      TOOLS: ["shell", "file_read"],
      TOOLS_SHELL_ROOTS: ["/srv/a", "/srv/b"],
      TOOLS_SHELL_TIMEOUT_MS: 60_000,
    });
  });

  it("declared honestly: not idempotent, irreversible, so never run in a worker; allowed under sovereign", () => {
    const tool = createShellTool(config);
    expect([tool.reversibility, tool.idempotent]).toEqual(["irreversible", false]);
    expect(localToolProblem("shell")).toMatch(/not idempotent/);
    expect(localToolProblem("file_write")).toBeUndefined();
    const grant = { kind: "shell" as const, allowedCommands: ["echo"] };
    expect(authorizeTool("shell", tool.capability, [grant], "sovereign")).toEqual(grant);
  });
});

describe("the shell tool runs granted programs, argv only", () => {
  it("runs a granted command with its arguments and returns its output", async () => {
    const result = await run(["echo"], { command: "echo", args: ["hello", "world"] });
    expect(result.output).toEqual({ exitCode: 0, stdout: "hello world\n", stderr: "", truncated: false });
  });

  it.each([
    ["`;`", "echo hi; touch pwned"],
    ["`$(…)`", "$(touch pwned)"],
    ["backticks", "`touch pwned`"],
    ["`&&`", "echo a && touch pwned"],
  ])("escape: %s in the command is refused before anything runs", async (_what, command) => {
    await expect(run(["echo", "touch", "sh"], { command })).rejects.toMatchObject(notAllowed);
    expect(await readdir(root)).not.toContain("pwned");
  });

  it("escape: `;`, `$(…)`, backticks and `&&` in arguments reach the program as text, never a shell", async () => {
    const args = ["hi; touch pwned1", "$(touch pwned2)", "`touch pwned3`", "&&", "touch", "pwned4"];
    const result = await run(["echo"], { command: "echo", args });
    expect(result.output).toMatchObject({ stdout: `${args.join(" ")}\n` });
    expect((await readdir(root)).filter((name) => name.startsWith("pwned"))).toEqual([]);
  });

  it("escape: a command not granted is refused, by name, by absolute path, or through a symlink to it", async () => {
    await expect(run(["echo"], { command: "touch", args: ["pwned"] })).rejects.toMatchObject(notAllowed);
    await expect(run(["echo"], { command: "/usr/bin/touch", args: ["pwned"] })).rejects.toMatchObject(
      notAllowed,
    );
    await expect(run(["echo"], { command: join(root, "echo"), args: ["pwned"] })).rejects.toMatchObject(
      notAllowed,
    );
    await expect(run(["echo"], { command: "./echo", args: ["pwned"] })).rejects.toMatchObject(notAllowed);
    expect(await readdir(root)).not.toContain("pwned");
  });

  it("escape: the working directory is confined like a file path: outside, `../` and a symlink out are refused", async () => {
    for (const cwd of [outside, "../outside", "out-dir", "/"])
      await expect(run(["touch"], { command: "touch", args: ["pwned"], cwd }), cwd).rejects.toMatchObject({
        code: "PATH_NOT_ALLOWED",
      });
    expect(await readdir(outside)).toEqual([]);
  });

  it("a minimal environment: PATH, HOME and LANG only, none of the tools actor's variables", async () => {
    process.env.SECRET_OF_THE_ACTOR = "hunter2";
    try {
      const result = (await run(["env"], { command: "env" })).output as { stdout: string };
      expect(result.stdout.trim().split("\n").sort()).toEqual([
        "HOME=" + root,
        "LANG=C.UTF-8",
        "PATH=/usr/local/bin:/usr/bin:/bin",
      ]);
    } finally {
      delete process.env.SECRET_OF_THE_ACTOR;
    }
  });

  it.runIf(isRoot)("under root, runs the command as nobody", async () => {
    const result = (await run(["id"], { command: "id", args: ["-u"] })).output as { stdout: string };
    expect(result.stdout.trim()).toBe(String(NOBODY));
  });

  it("a non-zero exit is the program's answer: its code and output in the result (where output redaction applies), not a failure of the tool", async () => {
    const result = await run(["sh"], { command: "sh", args: ["-c", "echo out; echo oops >&2; exit 3"] });
    expect(result.output).toEqual({ exitCode: 3, stdout: "out\n", stderr: "oops\n", truncated: false });
  });

  it("a command timed out fails the call with neither its output in the message nor in details", async () => {
    const error = await run(["sh"], {
      command: "sh",
      args: ["-c", "echo token-1234; echo token-5678 >&2; sleep 30"],
      timeoutMs: 300,
    }).then(
      () => ({ code: "none", message: "", details: undefined }),
      (err: unknown) => err as { code: string; message: string; details: unknown },
    );
    expect(error).toMatchObject({ code: "TOOL_FAILED", details: { timedOut: true } });
    expect(JSON.stringify([error.message, error.details])).not.toMatch(/token-/);
  });

  it("output is capped: the rest is read and dropped, and the result says so", async () => {
    const result = (await run(["head"], { command: "head", args: ["-c", "200000", "/dev/zero"] })).output as {
      stdout: string;
      truncated: boolean;
    };
    expect(result.stdout.length).toBe(MAX_COMMAND_OUTPUT_BYTES);
    expect(result.truncated).toBe(true);
  });

  it("the timeout kills the whole process group: what the command started in the background goes too", async () => {
    const started = Date.now();
    await expect(
      run(["sh"], { command: "sh", args: ["-c", "sleep 30 & echo $! > bg.pid; wait"], timeoutMs: 500 }),
    ).rejects.toMatchObject({
      code: "TOOL_FAILED",
      message: expect.stringContaining("timed out after 500 ms") as string,
    });
    expect(Date.now() - started).toBeLessThan(5_000);
    const pid = Number((await readFile(join(root, "bg.pid"), "utf8")).trim());
    expect(pid).toBeGreaterThan(0);
    // Gone, or dead and waiting for a reaper (a container's pid 1 may never reap it): not running.
    const state = await readFile(`/proc/${pid}/stat`, "utf8").then(
      (stat) => stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3),
      () => "gone",
    );
    expect(["gone", "Z", "X"]).toContain(state);
  });

  it("an aborted call (the run cancelled, the invoker's timeout) kills the command", async () => {
    const controller = new AbortController();
    const call = run(["sleep"], { command: "sleep", args: ["30"] }, controller.signal);
    setTimeout(() => controller.abort(), 100);
    await expect(call).rejects.toMatchObject({
      code: "TOOL_FAILED",
      message: expect.stringContaining("killed") as string,
    });
  });
});

describe("under root, each command in a PID namespace of its own", () => {
  it.runIf(isRoot)(
    "what a command detaches with setsid dies when it exits, where a process group kill misses it",
    async () => {
      expect(pidNamespace).toBeDefined();
      const duration = sleepMarker();
      const tool = createShellTool({ ...config, ...(pidNamespace ? { pidNamespace } : {}) });
      const result = await tool.execute(
        tool.input.parse({ command: "sh", args: ["-c", detachingScript(duration)] }),
        toolCtx({ kind: "shell", allowedCommands: ["sh"] }),
      );
      expect(result.output).toMatchObject({ exitCode: 0, stdout: "started\n" });
      expect(await sleeping(duration)).toEqual([]);
      const id = (
        await tool.execute(
          tool.input.parse({ command: "id", args: ["-u"] }),
          toolCtx({ kind: "shell", allowedCommands: ["id"] }),
        )
      ).output as { stdout: string };
      expect(id.stdout.trim()).toBe(String(NOBODY));
    },
  );

  it.runIf(isRoot)(
    "a tools actor killed outright (SIGKILL) leaves nothing of its commands running",
    async () => {
      expect(pidNamespace).toBeDefined();
      if (!pidNamespace) return;
      const [detached, waiting] = [sleepMarker(), sleepMarker()];
      const sh = await findExecutable("sh");
      const run = inPidNamespace(pidNamespace, { uid: NOBODY, gid: NOBODY }, sh?.path ?? "/bin/sh", [
        "-c",
        `${detachingScript(detached)}; sleep ${waiting}`,
      ]);
      // The test's stand-in for the tools actor: a process whose only child is the command's chain.
      const actor = spawn("sh", ["-c", '"$@" & wait', "sh", run.file, ...run.args], {
        cwd: root,
        stdio: ["ignore", "pipe", "inherit"],
      });
      const closed = new Promise((resolve) => actor.stdout.on("close", resolve));
      await new Promise((resolve) => actor.stdout.once("data", resolve));
      expect(await sleeping(detached)).not.toEqual([]);
      actor.kill("SIGKILL");
      // Every holder of the output pipe is gone once it closes.
      await closed;
      expect([...(await sleeping(detached)), ...(await sleeping(waiting))]).toEqual([]);
    },
  );
});
