import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { RedactionConfig } from "../contracts/redaction.js";
import { AgentError } from "../runtime/errors.js";

const SHAPE =
  '{ tools: { <tool name or "*">: { paths?: ["input.<key>…", "output.<key>…"], patterns?: ["<regex>"] } } }';

/**
 * The operators' redaction file (YAML or JSON), read once at start; undefined without one. A file
 * that cannot be read or does not fit throws INVALID_INPUT naming the variable, so the actor stops
 * rather than write what it was told to keep out.
 */
export function loadRedactionConfig(
  variable: string,
  path: string | undefined,
  readText: (path: string) => string = (p) => readFileSync(p, "utf8"),
): RedactionConfig | undefined {
  if (path === undefined) return undefined;
  const where = `${variable} (${path})`;
  let raw: unknown;
  try {
    raw = parseYaml(readText(path));
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause);
    throw new AgentError("INVALID_INPUT", `invalid configuration: ${where}: ${why}`, { cause });
  }
  const parsed = RedactionConfig.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `${i.path.join(".") || "(top)"}: ${i.message}`)
      .join("; ");
    throw new AgentError("INVALID_INPUT", `invalid configuration: ${where}: ${problems} (expected ${SHAPE})`);
  }
  return parsed.data;
}
