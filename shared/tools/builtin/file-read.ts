import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { z } from "zod";
import { AgentError } from "../../runtime/errors.js";
import { defineTool } from "../tool.js";
import { assertOpenedWithin, confinePath, grantedPaths } from "../path-grant.js";
import { assertUnprotected, openedPath } from "./protected-paths.js";

/** The most a read returns (a larger file is read in parts with `offset`): it must fit a NATS message. */
export const MAX_READ_BYTES = 256 * 1024;
/** An absolute path, or one relative to the grant's first directory. */
export const FilePath = z.string().min(1).max(4096);

export const FileReadInput = z.object({
  path: FilePath,
  offset: z.number().int().nonnegative().default(0),
  maxBytes: z.number().int().min(1).max(MAX_READ_BYTES).default(MAX_READ_BYTES),
});
export type FileReadInput = z.infer<typeof FileReadInput>;

/** Opens a regular file that does not change underfoot: no symlink at the end, no FIFO to block on. */
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** What the file tools are told of the process that runs them. */
export interface FileToolOptions {
  /** This actor's credential files (see secretFilesOf): refused whatever the grant. */
  secretFiles: readonly string[];
}

/**
 * Reads a text file inside the grant's `allowedPaths` (fileRead), at most MAX_READ_BYTES at a
 * time; never a protected path (see assertUnprotected).
 */
export const createFileReadTool = (options: FileToolOptions) =>
  defineTool({
    name: "file_read",
    description:
      "Reads a UTF-8 text file inside the granted paths. Returns its content from `offset`, at most `maxBytes` (256 KiB), and whether more follows.",
    input: FileReadInput,
    capability: { kind: "fileRead" },
    reversibility: "pure",
    idempotent: true,
    timeoutMs: 30_000,
    execute: async (input, ctx) => {
      const allowed = grantedPaths(ctx.granted, "fileRead");
      const path = await confinePath(input.path, allowed);
      await assertUnprotected(input.path, path.real, options.secretFiles);
      if (!path.exists) throw new AgentError("NOT_FOUND", `file '${input.path}' does not exist`);
      const handle = await open(path.real, READ_FLAGS);
      try {
        await assertOpenedWithin(handle.fd, allowed);
        const info = await handle.stat();
        const opened = (await openedPath(handle.fd)) ?? path.real;
        await assertUnprotected(input.path, opened, options.secretFiles, info);
        if (!info.isFile()) throw new AgentError("INVALID_INPUT", `'${input.path}' is not a regular file`);
        const buffer = Buffer.alloc(Math.max(0, Math.min(input.maxBytes, info.size - input.offset)));
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, input.offset);
        return {
          output: {
            path: path.requested,
            size: info.size,
            offset: input.offset,
            bytes: bytesRead,
            truncated: input.offset + bytesRead < info.size,
            content: buffer.subarray(0, bytesRead).toString("utf8"),
          },
        };
      } finally {
        await handle.close();
      }
    },
  });
