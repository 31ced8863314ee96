/**
 * Canonical JSON: object keys sorted, no whitespace, `undefined` members dropped. Two values that
 * are equal as data produce the same text, which is what hashing tool inputs and transitions needs.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value)) ?? "null";
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((item) => (item === undefined ? null : sortKeys(item)));
  if (value !== null && typeof value === "object") {
    const source = value as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(source).sort()) {
      const member = source[key];
      if (member === undefined) continue;
      // Assigned, a `__proto__` member (JSON.parse makes it an own one) would set the prototype.
      if (key === "__proto__") Object.defineProperty(out, key, { value: sortKeys(member), enumerable: true });
      else out[key] = sortKeys(member);
    }
    return out;
  }
  return value;
}

/**
 * Whether two values have the same canonical JSON, decided without writing either: comparing a
 * replayed record with the one on record this way walks both once instead of making two sorted
 * copies and two serialisations. What canonical JSON cannot tell apart is equal here too: key
 * order, an absent member and an `undefined` one, `undefined` and `null` in an array, NaN and null.
 */
export function canonicallyEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  const x = leaf(a);
  const y = leaf(b);
  if (x !== OBJECT || y !== OBJECT) return x === y;
  const arrays = Array.isArray(a);
  if (arrays !== Array.isArray(b)) return false;
  return arrays ? sameItems(a as unknown[], b as unknown[]) : sameMembers(a as object, b as object);
}

const OBJECT = Symbol("object");

/** What JSON leaves out of an object, and writes as null in an array or alone. */
function omitted(value: unknown): boolean {
  const type = typeof value;
  return type === "undefined" || type === "function" || type === "symbol";
}

/** A value as JSON writes it, when it is not an object or array (OBJECT then). */
function leaf(value: unknown): unknown {
  if (value === null || omitted(value)) return null;
  if (typeof value === "object") return OBJECT;
  // JSON writes -0 as 0 (=== agrees), NaN and the infinities as null.
  if (typeof value === "number" && !Number.isFinite(value)) return null;
  return value;
}

function sameItems(a: unknown[], b: unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!canonicallyEqual(a[i], b[i])) return false;
  return true;
}

function sameMembers(a: object, b: object): boolean {
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  let members = 0;
  for (const key of Object.keys(x)) {
    const member = x[key];
    if (omitted(member)) continue;
    members += 1;
    const other = y[key];
    if (omitted(other) || !Object.hasOwn(y, key) || !canonicallyEqual(member, other)) return false;
  }
  for (const key of Object.keys(y)) if (!omitted(y[key])) members -= 1;
  return members === 0;
}
