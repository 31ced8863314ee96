import { describe, expect, it } from "vitest";
import { canonicalJson, canonicallyEqual } from "../../shared/runtime/canonical-json.js";
import { seededRandom, type Random } from "../../shared/runtime/random.js";

/** The relation canonicallyEqual must decide: equal canonical JSON. */
const sameText = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b);

const LEAVES: unknown[] = [null, undefined, 0, -0, 1, 1.5, NaN, Infinity, "", "a", "0", true, false];

/** A random JSON-like value, with the values JSON writes specially among its leaves. */
function value(random: Random, depth: number): unknown {
  const pick = random.next();
  if (depth === 0 || pick < 0.4) return LEAVES[Math.floor(random.next() * LEAVES.length)];
  const size = Math.floor(random.next() * 4);
  if (pick < 0.7) return Array.from({ length: size }, () => value(random, depth - 1));
  const out: Record<string, unknown> = {};
  for (let i = 0; i < size; i++)
    out["kab"[Math.floor(random.next() * 3)] as string] = value(random, depth - 1);
  return out;
}

/** The same data with every object's keys in reverse order. */
function reordered(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reordered);
  if (v === null || typeof v !== "object") return v;
  return Object.fromEntries(
    Object.entries(v)
      .reverse()
      .map(([k, m]) => [k, reordered(m)]),
  );
}

/** One small change somewhere in the value (or none, when it lands on an equivalent leaf). */
function mutated(v: unknown, random: Random): unknown {
  if (Array.isArray(v) && v.length > 0 && random.next() < 0.7) {
    const i = Math.floor(random.next() * v.length);
    return (v as unknown[]).map((item, j) => (j === i ? mutated(item, random) : item));
  }
  if (v !== null && typeof v === "object" && !Array.isArray(v)) {
    const keys = Object.keys(v);
    const copy = { ...(v as Record<string, unknown>) };
    const key = keys[Math.floor(random.next() * keys.length)];
    if (key !== undefined && random.next() < 0.6) copy[key] = mutated(copy[key], random);
    else if (key !== undefined && random.next() < 0.5) delete copy[key];
    else copy.z = value(random, 1);
    return copy;
  }
  return value(random, 2);
}

describe("canonically equal: the same canonical JSON, decided without writing it", () => {
  it("ignores key order, undefined members, and what JSON writes alike", () => {
    expect(canonicallyEqual({ a: 1, b: { c: [1, 2] } }, { b: { c: [1, 2] }, a: 1 })).toBe(true);
    expect(canonicallyEqual({ a: 1, u: undefined }, { a: 1 })).toBe(true);
    expect(canonicallyEqual([undefined, NaN, -0], [null, null, 0])).toBe(true);
    expect(canonicallyEqual(undefined, null)).toBe(true);
    expect(canonicallyEqual({ f: () => 1 }, {})).toBe(true);
  });

  it("tells apart what canonical JSON tells apart", () => {
    expect(canonicallyEqual({ a: null }, {})).toBe(false);
    expect(canonicallyEqual({ a: null }, { a: undefined })).toBe(false);
    expect(canonicallyEqual({}, [])).toBe(false);
    expect(canonicallyEqual([1, 2], [2, 1])).toBe(false);
    expect(canonicallyEqual([1], [1, undefined])).toBe(false);
    expect(canonicallyEqual({ a: { b: [1, { c: "x" }] } }, { a: { b: [1, { c: "y" }] } })).toBe(false);
    expect(canonicallyEqual({ a: 1 }, { a: 1, b: 2 })).toBe(false);
    expect(canonicallyEqual({ a: 1, b: 2 }, { a: 1 })).toBe(false);
    expect(canonicallyEqual({ toString: 1 }, {})).toBe(false);
    expect(canonicallyEqual("1", 1)).toBe(false);
    expect(canonicallyEqual(0, false)).toBe(false);
  });

  it("keeps a `__proto__` member a model's JSON can hold, as data like any other", () => {
    const parsed = JSON.parse('{"__proto__":{"a":1},"b":2}') as unknown;
    expect(canonicalJson(parsed)).toBe('{"__proto__":{"a":1},"b":2}');
    expect(sameText(parsed, { b: 2 })).toBe(false);
    expect(canonicallyEqual(parsed, { b: 2 })).toBe(false);
    expect(canonicallyEqual(parsed, JSON.parse('{"b":2,"__proto__":{"a":1}}'))).toBe(true);
  });

  it("agrees with comparing canonical JSON on thousands of random values, reordered and changed", () => {
    const random = seededRandom(69);
    let differing = 0;
    for (let i = 0; i < 3_000; i++) {
      const a = value(random, 4);
      const b = random.next() < 0.5 ? reordered(a) : mutated(reordered(a), random);
      if (!sameText(a, b)) differing += 1;
      expect(canonicallyEqual(a, b), `${canonicalJson(a)} vs ${canonicalJson(b)}`).toBe(sameText(a, b));
      expect(canonicallyEqual(b, a)).toBe(sameText(a, b));
    }
    // Both answers were exercised many times.
    expect(differing).toBeGreaterThan(500);
    expect(differing).toBeLessThan(2_500);
  });
});
