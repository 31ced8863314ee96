/** Reading a RunSpec file: JSON or YAML by its name, each refused with its own parser's words. */
import { readFile } from "node:fs/promises";
import { extname } from "node:path";
import { parse as parseYaml } from "yaml";
import { AgentError } from "../../shared/runtime/errors.js";

/**
 * A spec file: `.json` is parsed as JSON and `.yaml`/`.yml` as YAML, each failure saying that
 * format's problem and where (line and column), which the file's author needs to fix it; a file
 * named otherwise is read as YAML, which JSON is a subset of.
 */
export async function readSpecFile(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (cause) {
    throw new AgentError("INVALID_INPUT", `cannot read spec file '${path}'`, { cause });
  }
  const ext = extname(path).toLowerCase();
  if (ext === ".json") return parseJsonSpec(path, text);
  try {
    return parseYaml(text) as unknown;
  } catch (cause) {
    const where = cause instanceof Error ? `: ${cause.message.split("\n")[0]?.replace(/:$/, "")}` : "";
    const what = ext === ".yaml" || ext === ".yml" ? "is not valid YAML" : "is neither JSON nor YAML";
    throw new AgentError("INVALID_SPEC", `spec file '${path}' ${what}${where}`, { cause });
  }
}

function parseJsonSpec(path: string, text: string): unknown {
  // An editor's byte-order mark is not the author's mistake: JSON.parse would refuse it.
  const json = text.replace(/^\uFEFF/, "");
  try {
    return JSON.parse(json) as unknown;
  } catch (cause) {
    // V8's message names no position for an unexpected token (and quotes the whole text), so the
    // problem and its place are found by a scan of our own; V8's words only if the scan finds none.
    const found = jsonProblem(json);
    const why = found
      ? `${found.problem} at line ${found.line}, column ${found.column}`
      : cause instanceof Error
        ? cause.message
        : String(cause);
    throw new AgentError("INVALID_SPEC", `spec file '${path}' is not valid JSON: ${why}`, { cause });
  }
}

/** The first thing that makes `text` not JSON, and where (1-based); undefined when it is JSON. */
export function jsonProblem(text: string): { problem: string; line: number; column: number } | undefined {
  const scan = new JsonScan(text);
  try {
    scan.document();
    return undefined;
  } catch (err) {
    if (!(err instanceof JsonProblem)) throw err;
    const before = text.slice(0, err.at);
    const line = before.split("\n").length;
    return { problem: err.problem, line, column: err.at - before.lastIndexOf("\n") };
  }
}

class JsonProblem extends Error {
  constructor(
    readonly problem: string,
    readonly at: number,
  ) {
    super(problem);
  }
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** A strict JSON scanner (RFC 8259) that says only where the text stops being JSON. */
class JsonScan {
  private at = 0;

  constructor(private readonly text: string) {}

  document(): void {
    this.value();
    this.space();
    if (this.at < this.text.length) this.fail(`${this.unexpected()} after the JSON value`);
  }

  private value(): void {
    this.space();
    const c = this.text[this.at];
    if (c === "{") return this.object();
    if (c === "[") return this.array();
    if (c === '"') return this.string();
    for (const literal of ["true", "false", "null"])
      if (this.text.startsWith(literal, this.at)) return void (this.at += literal.length);
    NUMBER.lastIndex = this.at;
    if (c !== undefined && /[-\d]/.test(c) && NUMBER.test(this.text))
      return void (this.at = NUMBER.lastIndex);
    this.fail(this.unexpected());
  }

  private object(): void {
    this.at++;
    this.space();
    if (this.eat("}")) return;
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') this.fail("expected a property name in double quotes");
      this.string();
      this.space();
      if (!this.eat(":")) this.fail("expected ':' after the property name");
      this.value();
      this.space();
      if (this.eat("}")) return;
      if (!this.eat(",")) this.fail("expected ',' or '}'");
    }
  }

  private array(): void {
    this.at++;
    this.space();
    if (this.eat("]")) return;
    for (;;) {
      this.value();
      this.space();
      if (this.eat("]")) return;
      if (!this.eat(",")) this.fail("expected ',' or ']'");
    }
  }

  private string(): void {
    this.at++;
    for (;;) {
      const c = this.text[this.at];
      if (c === undefined) this.fail("unterminated string");
      if (c === '"') return void this.at++;
      if (c === "\\") {
        const escape = this.text[this.at + 1] ?? "";
        if (escape === "u" && /^[\da-fA-F]{4}$/.test(this.text.slice(this.at + 2, this.at + 6))) this.at += 6;
        else if (escape !== "" && '"\\/bfnrt'.includes(escape)) this.at += 2;
        else this.fail("invalid escape in a string");
        continue;
      }
      if (c < " ") this.fail("a control character (a raw newline or tab) in a string");
      this.at++;
    }
  }

  private space(): void {
    while (/[ \t\n\r]/.test(this.text[this.at] ?? "")) this.at++;
  }

  private eat(c: string): boolean {
    if (this.text[this.at] !== c) return false;
    this.at++;
    return true;
  }

  private unexpected(): string {
    const c = this.text[this.at];
    if (c === undefined) return "unexpected end of the file";
    return c < " " ? `unexpected ${JSON.stringify(c)}` : `unexpected '${c}'`;
  }

  private fail(problem: string): never {
    const ended = this.at >= this.text.length && !problem.startsWith("unexpected end");
    throw new JsonProblem(ended ? `${problem}, and the file ends there` : problem, this.at);
  }
}
