import { createHash } from "node:crypto";
import xxhash from "xxhash-wasm";
import { canonicalJson } from "./canonical-json.js";

// The wasm module loads once per process; after that hashing is synchronous.
const hasher = await xxhash();

/** 64-bit xxHash of a string, as 16 hex digits. */
export function xxh64(text: string): string {
  return hasher.h64ToString(text);
}

export function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** sha256 over the canonical JSON of a value: equal data, equal hash. */
export function contentHash(value: unknown): string {
  return sha256(canonicalJson(value));
}
