import {
  chmod,
  link,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CapabilityObject } from "../../shared/contracts/capability.js";
import { ScriptedDriver } from "../../shared/models/scripted.js";
import { createFileListTool } from "../../shared/tools/builtin/file-list.js";
import { createFileReadTool, MAX_READ_BYTES } from "../../shared/tools/builtin/file-read.js";
import {
  createFileWriteTool,
  FileWriteInput,
  MAX_WRITE_BYTES,
} from "../../shared/tools/builtin/file-write.js";
import { secretFilesOf } from "../../shared/tools/builtin/protected-paths.js";
import { sequentialIds } from "../../shared/runtime/ids.js";
import { assertOpenedWithin, confinePath } from "../../shared/tools/path-grant.js";
import { authorizeTool } from "../../shared/tools/capabilities.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { ToolRegistry } from "../../shared/tools/registry.js";
import type { AnyTool } from "../../shared/tools/tool.js";
import { kinds, runner, spec, toolCtx } from "../helpers/fixtures.js";

let base: string;
let root: string;
let outside: string;
/** The actor's credential files, as its environment names them (filled in beforeAll). */
const secretFiles: string[] = [];
const fileReadTool = createFileReadTool({ secretFiles });
const fileListTool = createFileListTool({ secretFiles });
const fileWriteTool = createFileWriteTool({ secretFiles, ids: sequentialIds() });
const reads = (): CapabilityObject => ({ kind: "fileRead", allowedPaths: [root] });
const writes = (): CapabilityObject => ({ kind: "fileWrite", allowedPaths: [root] });
const read = (input: unknown) => fileReadTool.execute(fileReadTool.input.parse(input), toolCtx(reads()));
const write = (input: unknown) => fileWriteTool.execute(fileWriteTool.input.parse(input), toolCtx(writes()));
const refusal = { code: "PATH_NOT_ALLOWED" };

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), "file-tools-"));
  root = join(base, "granted");
  outside = join(base, "outside");
  await mkdir(join(root, "sub"), { recursive: true });
  await mkdir(outside);
  await writeFile(join(root, "notes.txt"), "inside");
  await writeFile(join(outside, "secret.txt"), "secret");
  await symlink(join(outside, "secret.txt"), join(root, "to-secret"));
  await symlink(outside, join(root, "out-dir"));
  await symlink(join(root, "notes.txt"), join(root, "to-notes"));
  await symlink(join(outside, "not-yet"), join(root, "dangling"));
  // A seed mounted the Kubernetes way: the named path is a symlink into a versioned directory.
  await mkdir(join(base, "keys", "v1"), { recursive: true });
  await writeFile(join(base, "keys", "v1", "seed.nk"), "SUSEED");
  await symlink(join(base, "keys", "v1", "seed.nk"), join(base, "keys", "seed.nk"));
  await link(join(base, "keys", "v1", "seed.nk"), join(root, "hard-seed"));
  secretFiles.push(...secretFilesOf({ NATS_NKEY_SEED_FILE: join(base, "keys", "seed.nk") }));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe("file_read, file_write, file_list confined to allowedPaths", () => {
  it("reads a file inside the grant, by absolute path, relative path, and through a symlink that stays inside", async () => {
    expect((await read({ path: join(root, "notes.txt") })).output).toMatchObject({
      content: "inside",
      size: 6,
      truncated: false,
    });
    expect((await read({ path: "notes.txt" })).output).toMatchObject({ content: "inside" });
    expect((await read({ path: "to-notes" })).output).toMatchObject({ content: "inside" });
    expect((await read({ path: "notes.txt", offset: 2, maxBytes: 2 })).output).toMatchObject({
      content: "si",
      truncated: true,
    });
  });

  it("escape: `../` out of the grant is refused", async () => {
    await expect(read({ path: "../outside/secret.txt" })).rejects.toMatchObject(refusal);
    await expect(
      read({ path: join(root, "sub", "..", "..", "outside", "secret.txt") }),
    ).rejects.toMatchObject(refusal);
    await expect(write({ path: "sub/../../outside/new.txt", content: "x" })).rejects.toMatchObject(refusal);
  });

  it("escape: an absolute path outside the grant is refused", async () => {
    await expect(read({ path: join(outside, "secret.txt") })).rejects.toMatchObject(refusal);
    await expect(read({ path: "/etc/passwd" })).rejects.toMatchObject(refusal);
    await expect(write({ path: join(outside, "planted.txt"), content: "x" })).rejects.toMatchObject(refusal);
  });

  it("escape: a symlink inside the grant to a file outside is followed and refused, for reads and writes", async () => {
    await expect(read({ path: "to-secret" })).rejects.toMatchObject({
      code: "PATH_NOT_ALLOWED",
      message: expect.stringContaining(join(outside, "secret.txt")) as string,
    });
    await expect(write({ path: "to-secret", content: "overwritten" })).rejects.toMatchObject(refusal);
    expect(await readFile(join(outside, "secret.txt"), "utf8")).toBe("secret");
  });

  it("escape: a symlinked parent directory cannot lead a new file, a read or a listing outside", async () => {
    await expect(write({ path: "out-dir/planted.txt", content: "x" })).rejects.toMatchObject(refusal);
    await expect(read({ path: "out-dir/secret.txt" })).rejects.toMatchObject(refusal);
    await expect(
      fileListTool.execute({ path: "out-dir" }, toolCtx({ kind: "fileRead", allowedPaths: [root] })),
    ).rejects.toMatchObject(refusal);
    expect(await readdir(outside)).toEqual(["secret.txt"]);
  });

  it("both checks refuse a symlink out on their own: the resolved path before the open, the opened file after it", async () => {
    for (const path of ["to-secret", "out-dir/secret.txt", "out-dir/new.txt", "out-dir"])
      await expect(confinePath(path, [root]), path).rejects.toMatchObject(refusal);
    expect(await confinePath("out-dir/../notes.txt", [root])).toMatchObject({ exists: true });
    // Through a file, not a directory: nothing to check it by, so refused rather than failed.
    await expect(confinePath("notes.txt/below", [root])).rejects.toMatchObject({
      code: "PATH_NOT_ALLOWED",
      message: expect.stringContaining("cannot be resolved (ENOTDIR)") as string,
    });
    const handle = await open(join(outside, "secret.txt"), "r");
    try {
      await expect(assertOpenedWithin(handle.fd, [root])).rejects.toMatchObject(refusal);
      await expect(assertOpenedWithin(handle.fd, [outside])).resolves.toBeUndefined();
    } finally {
      await handle.close();
    }
  });

  it("a dangling symlink is replaced by the write, never written through to where it pointed", async () => {
    await write({ path: "dangling", content: "here" });
    expect(await readFile(join(root, "dangling"), "utf8")).toBe("here");
    expect(await readdir(outside)).toEqual(["secret.txt"]);
  });

  it("a grant whose root is reached through a symlink still confines to where it leads", async () => {
    const linked = join(base, "linked-root");
    await symlink(root, linked);
    const ctx = toolCtx({ kind: "fileRead", allowedPaths: [linked] });
    expect(
      (await fileReadTool.execute({ path: "notes.txt", offset: 0, maxBytes: 10 }, ctx)).output,
    ).toMatchObject({
      content: "inside",
    });
    await expect(
      fileReadTool.execute({ path: "to-secret", offset: 0, maxBytes: 10 }, ctx),
    ).rejects.toMatchObject(refusal);
  });

  it("writes atomically: the content replaced whole, no temporary file left, the same write again the same file and output", async () => {
    const first = await write({ path: "sub/out.txt", content: "one" });
    const again = await write({ path: "sub/out.txt", content: "one" });
    expect(again.output).toEqual(first.output);
    expect(first.output).toMatchObject({ path: join(root, "sub", "out.txt"), bytes: 3 });
    await write({ path: "sub/out.txt", content: "two" });
    expect(await readFile(join(root, "sub", "out.txt"), "utf8")).toBe("two");
    expect(await readdir(join(root, "sub"))).toEqual(["out.txt"]);
    await expect(write({ path: "sub", content: "x" })).rejects.toMatchObject({ code: "INVALID_INPUT" });
    await expect(write({ path: "missing-dir/x.txt", content: "x" })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
  });

  it("size caps: a write over 256 KiB is invalid input; a read returns at most 256 KiB and says more follows", async () => {
    expect(
      FileWriteInput.safeParse({ path: "big", content: "é".repeat(MAX_WRITE_BYTES / 2 + 1) }).success,
    ).toBe(false);
    await writeFile(join(root, "big.txt"), Buffer.alloc(MAX_READ_BYTES + 10, "a"));
    const big = await read({ path: "big.txt" });
    expect(big.output).toMatchObject({ bytes: MAX_READ_BYTES, truncated: true, size: MAX_READ_BYTES + 10 });
  });

  it("file_list lists a granted directory, sorted, symlinks shown as such", async () => {
    const listed = await fileListTool.execute({ path: "sub" }, toolCtx(reads()));
    expect(listed.output).toEqual({
      path: join(root, "sub"),
      entries: [{ name: "out.txt", type: "file" }],
      truncated: false,
    });
    const top = (await fileListTool.execute({ path: root }, toolCtx(reads()))).output as {
      entries: { name: string; type: string }[];
    };
    expect(top.entries.find((e) => e.name === "to-secret")).toEqual({ name: "to-secret", type: "symlink" });
  });

  it("escape: /proc, /sys and /dev are refused whatever the grant (`*`, `/`), by path or through a symlink", async () => {
    await symlink("/proc/self/environ", join(root, "to-environ"));
    const every = (kind: "fileRead" | "fileWrite", path: string): ReturnType<typeof toolCtx> =>
      toolCtx({ kind, allowedPaths: [path] });
    for (const grant of ["*", "/"]) {
      for (const path of [
        "/proc/1/environ",
        "/proc/self/environ",
        "/sys/kernel/hostname",
        join(root, "to-environ"),
      ])
        await expect(
          fileReadTool.execute({ path, offset: 0, maxBytes: 10 }, every("fileRead", grant)),
          `${grant} ${path}`,
        ).rejects.toMatchObject(refusal);
      await expect(fileListTool.execute({ path: "/proc" }, every("fileRead", grant))).rejects.toMatchObject(
        refusal,
      );
      await expect(
        fileWriteTool.execute({ path: "/dev/shm/planted", content: "x" }, every("fileWrite", grant)),
      ).rejects.toMatchObject(refusal);
    }
    await expect(stat("/dev/shm/planted")).rejects.toMatchObject({ code: "ENOENT" });
    expect((await read({ path: "notes.txt" })).output).toMatchObject({ content: "inside" });
  });

  it("escape: the actor's credential files are refused whatever the grant: by path, where its symlink leads, and a hard link to one", async () => {
    const any = toolCtx({ kind: "fileRead", allowedPaths: ["*"] });
    for (const path of [join(base, "keys", "seed.nk"), join(base, "keys", "v1", "seed.nk")])
      await expect(fileReadTool.execute({ path, offset: 0, maxBytes: 10 }, any), path).rejects.toMatchObject({
        ...refusal,
        message: expect.stringContaining("credential") as string,
      });
    await expect(read({ path: "hard-seed" })).rejects.toMatchObject(refusal);
    await expect(
      fileWriteTool.execute(
        { path: join(base, "keys", "v1", "seed.nk"), content: "SUOTHER" },
        toolCtx({ kind: "fileWrite", allowedPaths: ["*"] }),
      ),
    ).rejects.toMatchObject(refusal);
    await expect(write({ path: "hard-seed", content: "SUOTHER" })).rejects.toMatchObject(refusal);
    expect(await readFile(join(base, "keys", "v1", "seed.nk"), "utf8")).toBe("SUSEED");
    expect(secretFilesOf({ NATS_CREDS_FILE: "rel.creds", NATS_TLS_KEY: "" })).toEqual([
      join(process.cwd(), "rel.creds"),
    ]);
  });

  it("file_write names its temporary file by an injected id, not the pid (the same in every container on a shared volume)", async () => {
    // Another container with this pid left its temporary files beside the target.
    for (let n = 1; n <= 100; n++)
      await writeFile(join(root, "sub", `.shared.txt.${process.pid}-${n}.tmp`), "");
    const named: string[] = [];
    const tool = createFileWriteTool({
      secretFiles,
      ids: { next: () => (named.push("id"), `id-${named.length}`) },
    });
    await tool.execute({ path: "sub/shared.txt", content: "mine" }, toolCtx(writes()));
    expect(await readFile(join(root, "sub", "shared.txt"), "utf8")).toBe("mine");
    expect(named).toHaveLength(1);
    for (const name of await readdir(join(root, "sub")))
      if (name.endsWith(".tmp")) await rm(join(root, "sub", name));
    await rm(join(root, "sub", "shared.txt"));
  });

  it("a replaced file keeps its permission bits: a granted script stays executable, a private file private", async () => {
    await writeFile(join(root, "run.sh"), "#!/bin/sh\n");
    await chmod(join(root, "run.sh"), 0o750);
    await write({ path: "run.sh", content: "#!/bin/sh\necho hi\n" });
    expect((await stat(join(root, "run.sh"))).mode & 0o777).toBe(0o750);
    await rm(join(root, "run.sh"));
  });

  it("declared honestly: reads and listings pure; a write idempotent but irreversible; all allowed under sovereign", () => {
    expect([fileReadTool, fileListTool].map((t) => [t.reversibility, t.idempotent])).toEqual([
      ["pure", true],
      ["pure", true],
    ]);
    expect([fileWriteTool.reversibility, fileWriteTool.idempotent]).toEqual(["irreversible", true]);
    for (const [tool, grant] of [
      [fileReadTool, reads()],
      [fileWriteTool, writes()],
    ] as const)
      expect(authorizeTool(tool.name, tool.capability, [grant], "sovereign")).toEqual(grant);
  });

  it("in a run, a refused path is `tool.denied` with the reason, the model is told, and the run goes on to commit", async () => {
    const driver = new ScriptedDriver({
      script: [
        { toolCalls: [{ name: "file_read", input: { path: "../outside/secret.txt" } }] },
        { toolCalls: [{ name: "file_read", input: { path: "notes.txt" } }] },
        { text: "read what I was allowed to" },
      ],
    });
    const tools: AnyTool[] = [echoTool, fileReadTool];
    const result = await runner({ driver, registry: new ToolRegistry(tools) }).run(
      spec({ tools: ["file_read"], capabilities: [reads()] }),
    );
    expect(result.state.status).toBe("committed");
    expect(kinds(result).filter((k) => k.startsWith("tool."))).toEqual([
      "tool.intent",
      "tool.denied",
      "tool.intent",
      "tool.completed",
    ]);
    const denied = result.audit.find((e) => e.kind === "tool.denied");
    expect(denied).toMatchObject({ actor: "tool:file_read", data: { code: "PATH_NOT_ALLOWED" } });
    expect(denied?.reason).toContain("outside the granted paths");
    const told = driver.requests[1]?.messages.find((m) => m.role === "tool");
    expect(told).toMatchObject({ isError: true });
    expect(told?.content).toContain("PATH_NOT_ALLOWED");
  });
});
