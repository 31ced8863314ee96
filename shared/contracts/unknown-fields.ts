import type { z } from "zod";

/** A field a schema does not know: where it is, and the known field it is most likely a typo of. */
export interface UnknownField {
  path: string;
  closest?: string;
}

/** The parts of a zod schema's definition this walk reads. */
interface Def {
  type: string;
  shape?: Record<string, Walkable>;
  innerType?: Walkable;
  element?: Walkable;
  options?: Walkable[];
  in?: Walkable;
  /** A loose object's (`z.looseObject`, `.catchall`): it takes any other field. */
  catchall?: Walkable;
  /** A literal's values. */
  values?: unknown[];
}
type Walkable = { _zod: { def: Def } };

/**
 * The fields of `value` that `schema` does not know, nested ones included: zod drops them when it
 * parses, so a typo (`maxIteration`) or a field of another version would be ignored without a
 * word. Records and other open shapes accept any field. Pure.
 */
export function unknownFields(schema: z.ZodType, value: unknown): UnknownField[] {
  const found: UnknownField[] = [];
  walk(schema, value, "", found);
  return found;
}

function walk(schema: Walkable, value: unknown, path: string, found: UnknownField[]): void {
  const def = schema._zod.def;
  const inner = def.innerType ?? def.in;
  if (inner) return walk(inner, value, path, found);
  if (def.type === "array" && def.element && Array.isArray(value)) {
    const element = def.element;
    value.forEach((item, i) => walk(element, item, `${path}[${i}]`, found));
  } else if (def.type === "union" && def.options) {
    // Of the options that take an object (for an object), the one that leaves the fewest fields
    // unknown is the one the value meant: a string option would leave none, and hide a typo.
    const objects = isObject(value) ? def.options.filter(takesObjects) : def.options;
    // One whose literal fields (a `kind`) the value has is the one it meant, typos and all.
    const named = objects.filter((option) => namesLiterals(option, value));
    const fitting = named.length > 0 ? named : objects;
    const tries = fitting.map((option) => {
      const inOption: UnknownField[] = [];
      walk(option, value, path, inOption);
      return inOption;
    });
    if (tries.length > 0) found.push(...tries.reduce((best, t) => (t.length < best.length ? t : best)));
  } else if (def.type === "object" && def.shape && isObject(value) && !def.catchall) {
    const known = Object.keys(def.shape);
    for (const [key, member] of Object.entries(value)) {
      const at = path === "" ? key : `${path}.${key}`;
      const field = def.shape[key];
      if (field) walk(field, member, at, found);
      else found.push({ path: at, ...closestOf(key, known) });
    }
  }
}

/** Whether a schema (through its wrappers) is an object, or a union of objects. */
function takesObjects(schema: Walkable): boolean {
  const def = schema._zod.def;
  const inner = def.innerType ?? def.in;
  if (inner) return takesObjects(inner);
  return def.type === "object" || (def.type === "union" && (def.options ?? []).some(takesObjects));
}

/** Whether an object schema has literal fields, and the value holds each one's value. */
function namesLiterals(schema: Walkable, value: unknown): boolean {
  const def = schema._zod.def;
  const inner = def.innerType ?? def.in;
  if (inner) return namesLiterals(inner, value);
  if (def.type !== "object" || !def.shape || !isObject(value)) return false;
  const literals = Object.entries(def.shape).filter(([, field]) => field._zod.def.type === "literal");
  return (
    literals.length > 0 &&
    literals.every(([key, field]) => (field._zod.def.values ?? []).includes(value[key]))
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The known name within a few edits of `key` (case aside), if one is. */
function closestOf(key: string, known: readonly string[]): { closest?: string } {
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    const distance = editDistance(key.toLowerCase(), name.toLowerCase());
    if (!best || distance < best.distance) best = { name, distance };
  }
  const near = best && best.distance <= Math.max(2, Math.floor(key.length / 3));
  return near ? { closest: best!.name } : {};
}

function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      next.push(Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + cost));
    }
    row = next;
  }
  return row[b.length]!;
}

/** One line naming the unknown fields, and what each may have meant. */
export function describeUnknown(fields: readonly UnknownField[]): string {
  const each = fields.map((f) => (f.closest ? `'${f.path}' (did you mean '${f.closest}'?)` : `'${f.path}'`));
  return `unknown field${fields.length === 1 ? "" : "s"} ${each.join(", ")}: remove ${fields.length === 1 ? "it" : "them"} or fix the name`;
}
