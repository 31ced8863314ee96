import { createHash } from "node:crypto";
import { constants } from "node:fs";
import { lstat, open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { z } from "zod";
import { AgentError } from "../../runtime/errors.js";
import type { IdGenerator } from "../../runtime/ids.js";
import { defineTool } from "../tool.js";
import { FilePath, type FileToolOptions } from "./file-read.js";
import { assertOpenedWithin, confinePath, grantedPaths } from "../path-grant.js";
import { assertUnprotected } from "./protected-paths.js";

/** The most a write takes: its content rides in the run's log (the INTENT) and a NATS message. */
export const MAX_WRITE_BYTES = 256 * 1024;

export const FileWriteInput = z.object({
  path: FilePath,
  content: z
    .string()
    .max(MAX_WRITE_BYTES)
    .refine((text) => Buffer.byteLength(text) <= MAX_WRITE_BYTES, `at most ${MAX_WRITE_BYTES} bytes`),
});
export type FileWriteInput = z.infer<typeof FileWriteInput>;

/** A new file only (O_EXCL), never through a symlink: the temporary file is this call's own. */
const TEMP_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

export interface FileWriteOptions extends FileToolOptions {
  /** Names each temporary file: unique across every container sharing a volume (not a pid). */
  ids: IdGenerator;
}

/**
 * Writes a UTF-8 text file inside the grant's `allowedPaths` (fileWrite), whole and atomically:
 * the content goes to a temporary file beside it, synced, then renamed over the target, so a
 * reader sees the old file or the new one, never a part. A replaced file keeps its permission
 * bits (a granted script stays executable; a private file stays private); a new one is 0644 less
 * the umask. Never a protected path (see assertUnprotected). Idempotent (the same call again
 * leaves the same file); irreversible (the old content is not kept, nothing can undo the write).
 */
export const createFileWriteTool = (options: FileWriteOptions) =>
  defineTool({
    name: "file_write",
    description:
      "Writes (creates or replaces) a UTF-8 text file inside the granted paths, atomically; its directory must exist. At most 256 KiB.",
    input: FileWriteInput,
    capability: { kind: "fileWrite" },
    reversibility: "irreversible",
    idempotent: true,
    timeoutMs: 30_000,
    execute: async (input, ctx) => {
      const allowed = grantedPaths(ctx.granted, "fileWrite");
      const path = await confinePath(input.path, allowed);
      const existing = path.exists ? await lstat(path.real) : undefined;
      await assertUnprotected(input.path, path.real, options.secretFiles, existing);
      if (existing && !existing.isFile())
        throw new AgentError("INVALID_INPUT", `'${input.path}' exists and is not a regular file`);
      const data = Buffer.from(input.content, "utf8");
      const temp = join(dirname(path.real), `.${basename(path.real)}.${options.ids.next()}.tmp`);
      const handle = await open(temp, TEMP_FLAGS, existing ? existing.mode & 0o777 : 0o644).catch(
        (err: unknown) => {
          if ((err as { code?: string }).code === "ENOENT")
            throw new AgentError("NOT_FOUND", `directory '${dirname(path.requested)}' does not exist`, {
              cause: err,
            });
          throw err;
        },
      );
      try {
        try {
          await assertOpenedWithin(handle.fd, allowed);
          await handle.writeFile(data);
          await handle.sync();
        } finally {
          await handle.close();
        }
        await rename(temp, path.real);
      } catch (err) {
        await unlink(temp).catch(() => undefined);
        throw err;
      }
      const sha256 = createHash("sha256").update(data).digest("hex");
      return { output: { path: path.requested, bytes: data.length, sha256 } };
    },
  });
