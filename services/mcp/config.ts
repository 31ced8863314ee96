import { readFile } from "node:fs/promises";
import { parse } from "yaml";
import { z } from "zod";
import { RedactionRules } from "../../shared/contracts/redaction.js";
import { DEFAULT_TOOL_TIMEOUT_MS, Reversibility } from "../../shared/contracts/tool.js";
import { AgentError } from "../../shared/runtime/errors.js";

/** A server's name: a capability's `mcp.server`, and the default prefix of its tools' names. */
const ServerName = z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, "letters, digits, `_` or `-`, at most 32");
/** Names of a tool's arguments that hold a path, or a list of paths (see path-arguments.ts). */
const PathArguments = z.array(z.string().min(1)).min(1);
const Millis = z.number().int().positive().max(86_400_000);

/** What the configuration declares of one MCP tool: nothing a server says overrides it. */
export const McpToolOverride = z.strictObject({
  /** Its name on the cluster (`agents.tools.<name>`); default: the server's prefix and its MCP name. */
  name: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, "letters, digits, `_` or `-`, at most 64")
    .optional(),
  idempotent: z.boolean().optional(),
  reversibility: Reversibility.optional(),
  timeoutMs: Millis.optional(),
  /** Replaces the server's `paths` for this tool; `[]`: this tool takes no path. */
  paths: z.array(z.string().min(1)).optional(),
  /** What of its calls is kept out of the run's log, as a tool's own descriptor says (docs/redaction.md). */
  redact: RedactionRules.optional(),
  /** False: not served to the cluster at all. */
  enabled: z.boolean().default(true),
});
export type McpToolOverride = z.infer<typeof McpToolOverride>;

const Restart = z.strictObject({
  initialDelayMs: Millis.default(500),
  maxDelayMs: Millis.default(30_000),
});

const Common = {
  /** Prefix of the cluster names of its tools; default `<server>_`. */
  toolPrefix: z
    .string()
    .regex(/^[A-Za-z0-9_-]{0,32}$/)
    .optional(),
  /** Each tool's timeout unless its override says otherwise. */
  timeoutMs: Millis.default(DEFAULT_TOOL_TIMEOUT_MS),
  /** How long a call waits for the server while it is (re)starting, before TOOL_UNAVAILABLE. */
  callWaitMs: z.number().int().nonnegative().max(600_000).default(10_000),
  restart: Restart.default({ initialDelayMs: 500, maxDelayMs: 30_000 }),
  /** Arguments holding paths, in every tool of the server that has them (overridable per tool). */
  paths: PathArguments.optional(),
  tools: z.record(z.string().min(1), McpToolOverride).default({}),
};

const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable's name");

export const McpStdioServer = z.strictObject({
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  /** The server's environment besides a few basics (PATH, HOME…): never the bridge's whole one. */
  env: z.record(EnvName, z.string()).default({}),
  /** Variables of the server's environment copied from the bridge's: `{ SERVER_VAR: BRIDGE_VAR }`. */
  envFrom: z.record(EnvName, EnvName).default({}),
  cwd: z.string().min(1).optional(),
  ...Common,
});

export const McpHttpServer = z.strictObject({
  /** A streamable HTTP endpoint. */
  url: z.url({ protocol: /^https?$/ }),
  headers: z.record(z.string().min(1), z.string()).default({}),
  /** Headers copied from the bridge's environment, `{ Authorization: BRIDGE_VAR }`: tokens stay out of the file. */
  headersFrom: z.record(z.string().min(1), EnvName).default({}),
  ...Common,
});

export const McpServerConfig = z.union([McpStdioServer, McpHttpServer]);
export type McpServerConfig = z.infer<typeof McpServerConfig>;

export const McpServersFile = z.strictObject({
  servers: z.record(ServerName, McpServerConfig),
});
export type McpServersFile = z.infer<typeof McpServersFile>;

export const isStdio = (server: McpServerConfig): server is z.infer<typeof McpStdioServer> =>
  "command" in server;

/**
 * The servers file's text (YAML, or JSON, which is YAML too) validated, or INVALID_INPUT naming
 * the file and every field that is wrong.
 */
export function parseServersFile(text: string, source: string): McpServersFile {
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (err) {
    throw new AgentError("INVALID_INPUT", `MCP_SERVERS_FILE ${source}: not YAML or JSON: ${String(err)}`, {
      cause: err,
    });
  }
  const parsed = McpServersFile.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .flatMap((issue) => closestBranch(issue, []))
      .map((issue) => `${issue.path.join(".") || "(the file)"}: ${issue.message}`)
      .join("; ");
    throw new AgentError("INVALID_INPUT", `MCP_SERVERS_FILE ${source}: ${problems}`, {
      details: parsed.error.issues,
    });
  }
  return parsed.data;
}

type Issue = { path: PropertyKey[]; message: string; code?: string; errors?: Issue[][] };

/**
 * A server that is neither a valid stdio nor a valid HTTP one fails both: its problems are those
 * of the kind it is closer to (fewer problems), each with its whole path, not "invalid input".
 */
function closestBranch(issue: Issue, at: PropertyKey[]): { path: PropertyKey[]; message: string }[] {
  const path = [...at, ...issue.path];
  if (issue.code !== "invalid_union" || !issue.errors?.length) return [{ path, message: issue.message }];
  const branch = issue.errors.reduce((best, next) => (next.length < best.length ? next : best));
  return branch.flatMap((inner) => closestBranch(inner, path));
}

export async function readServersFile(path: string): Promise<McpServersFile> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new AgentError("INVALID_INPUT", `MCP_SERVERS_FILE ${path}: cannot be read: ${String(err)}`, {
      cause: err,
    });
  }
  return parseServersFile(text, path);
}
