import { opendir } from "node:fs/promises";
import { z } from "zod";
import { AgentError } from "../../runtime/errors.js";
import { defineTool } from "../tool.js";
import { FilePath, type FileToolOptions } from "./file-read.js";
import { confinePath, grantedPaths } from "../path-grant.js";
import { assertUnprotected } from "./protected-paths.js";

/** The most entries one listing returns. */
export const MAX_LIST_ENTRIES = 1_000;

export const FileListInput = z.object({ path: FilePath });
export type FileListInput = z.infer<typeof FileListInput>;

type EntryType = "file" | "directory" | "symlink" | "other";

/**
 * Lists a directory inside the grant's `allowedPaths` (fileRead): names and types, sorted,
 * capped; never a protected directory (see assertUnprotected).
 */
export const createFileListTool = (options: FileToolOptions) =>
  defineTool({
    name: "file_list",
    description:
      "Lists a directory inside the granted paths: each entry's name and type (file, directory, symlink, other), sorted by name, at most 1000.",
    input: FileListInput,
    capability: { kind: "fileRead" },
    reversibility: "pure",
    idempotent: true,
    timeoutMs: 30_000,
    execute: async (input, ctx) => {
      const path = await confinePath(input.path, grantedPaths(ctx.granted, "fileRead"));
      await assertUnprotected(input.path, path.real, options.secretFiles);
      if (!path.exists) throw new AgentError("NOT_FOUND", `directory '${input.path}' does not exist`);
      const dir = await opendir(path.real).catch((err: unknown) => {
        if ((err as { code?: string }).code === "ENOTDIR")
          throw new AgentError("INVALID_INPUT", `'${input.path}' is not a directory`);
        throw err;
      });
      const entries: { name: string; type: EntryType }[] = [];
      let truncated = false;
      for await (const entry of dir) {
        if (entries.length === MAX_LIST_ENTRIES) {
          truncated = true;
          break;
        }
        const type: EntryType = entry.isFile()
          ? "file"
          : entry.isDirectory()
            ? "directory"
            : entry.isSymbolicLink()
              ? "symlink"
              : "other";
        entries.push({ name: entry.name, type });
      }
      entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      return { output: { path: path.requested, entries, truncated } };
    },
  });
