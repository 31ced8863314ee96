import type { RedactionConfig, RedactionRules } from "../contracts/redaction.js";

/** What a redacted value, or the redacted part of a string, becomes. */
export const REDACTED = "[REDACTED]";

type Field = "input" | "output";

interface CompiledPath {
  source: string;
  field: Field;
  /** Keys, indexes (digits) or `*`. */
  segments: string[];
}

interface CompiledPattern {
  /** What the audit calls it: its name, else its expression. */
  label: string;
  regex: RegExp;
}

/** One tool's rules, ready to apply (see compileRules). */
export interface CompiledRules {
  paths: CompiledPath[];
  patterns: CompiledPattern[];
}

/** A value with what the rules took out of it: the paths and patterns (by label) that fired. */
export interface RedactedField {
  value: unknown;
  paths: string[];
  patterns: string[];
}

/** Splits `output.items[*].token` into its field and segments. Pure; the path is a valid RedactionPath. */
function compilePath(source: string): CompiledPath {
  const [field, ...segments] = source
    .replaceAll(/\[(\d+|\*)\]/g, ".$1")
    .split(".")
    .filter((s) => s !== "");
  return { source, field: field as Field, segments };
}

/**
 * Merges rule sets (a tool's own, then the operators' for it and for `*`) into one, each path and
 * pattern once; undefined when none has any rule.
 */
export function compileRules(...sets: (RedactionRules | undefined)[]): CompiledRules | undefined {
  const paths = new Set<string>();
  /** Label by expression: an expression given twice is applied once. */
  const patterns = new Map<string, string>();
  for (const set of sets) {
    for (const path of set?.paths ?? []) paths.add(path);
    for (const pattern of set?.patterns ?? []) {
      const [regex, label] = typeof pattern === "string" ? [pattern, pattern] : [pattern.regex, pattern.name];
      if (!patterns.has(regex)) patterns.set(regex, label);
    }
  }
  if (paths.size === 0 && patterns.size === 0) return undefined;
  return {
    paths: [...paths].map(compilePath),
    patterns: [...patterns].map(([regex, label]) => ({ label, regex: new RegExp(regex, "g") })),
  };
}

/** The rules of one tool under an operators' file: its own entry and the `*` entry. */
export function configuredRules(config: RedactionConfig | undefined, tool: string): RedactionRules[] {
  if (!config) return [];
  return [config.tools[tool], config.tools["*"]].filter((r): r is RedactionRules => r !== undefined);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The value with what `segments` (from `i`) reach replaced; `hit` records whether anything was. */
function redactPath(
  value: unknown,
  segments: readonly string[],
  i: number,
  hit: { fired: boolean },
): unknown {
  if (i === segments.length) {
    hit.fired = true;
    return REDACTED;
  }
  const segment = segments[i] as string;
  if (Array.isArray(value)) {
    const all = segment === "*";
    if (!all && !/^\d+$/.test(segment)) return value;
    return (value as unknown[]).map((item, index) =>
      all || index === Number(segment) ? redactPath(item, segments, i + 1, hit) : item,
    );
  }
  if (!isRecord(value)) return value;
  const keys = segment === "*" ? Object.keys(value) : Object.hasOwn(value, segment) ? [segment] : [];
  if (keys.length === 0) return value;
  const copy = { ...value };
  // defineProperty, not assignment: a key named `__proto__` (JSON.parse makes one) stays a key.
  for (const key of keys)
    Object.defineProperty(copy, key, {
      value: redactPath(value[key], segments, i + 1, hit),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  return copy;
}

/** Every string inside the value with the patterns' matches replaced; `fired` collects the patterns that matched. */
function redactStrings(value: unknown, patterns: readonly CompiledPattern[], fired: Set<string>): unknown {
  if (typeof value === "string") {
    if (value === REDACTED) return value;
    let text = value;
    for (const { label, regex } of patterns) {
      const replaced = text.replace(regex, REDACTED);
      if (replaced !== text) fired.add(label);
      text = replaced;
    }
    return text;
  }
  if (Array.isArray(value)) return (value as unknown[]).map((item) => redactStrings(item, patterns, fired));
  if (!isRecord(value)) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [key, redactStrings(item, patterns, fired)]),
  );
}

/**
 * A tool call's input or output with the rules applied: the field's paths first, then the patterns
 * over every string left (a string that is not JSON is one string). Pure: the value is not changed.
 */
export function redactField(value: unknown, field: Field, rules: CompiledRules): RedactedField {
  let redacted = value;
  const paths: string[] = [];
  for (const path of rules.paths) {
    if (path.field !== field) continue;
    const hit = { fired: false };
    redacted = redactPath(redacted, path.segments, 0, hit);
    if (hit.fired) paths.push(path.source);
  }
  const fired = new Set<string>();
  if (rules.patterns.length > 0) redacted = redactStrings(redacted, rules.patterns, fired);
  return { value: redacted, paths, patterns: [...fired] };
}

/** Whether anything was redacted. */
export function fired(r: Pick<RedactedField, "paths" | "patterns">): boolean {
  return r.paths.length > 0 || r.patterns.length > 0;
}

/** Whether a value holds a redacted part anywhere: an input the log kept, without the values it had. */
export function holdsRedaction(value: unknown): boolean {
  if (typeof value === "string") return value.includes(REDACTED);
  if (Array.isArray(value)) return value.some(holdsRedaction);
  return isRecord(value) && Object.values(value).some(holdsRedaction);
}
