/**
 * Prompt-injection markers removed from tool output before it enters the conversation. Each
 * marker matches case-insensitively with any whitespace between its words; ChatML and Llama-3
 * role tokens match with any role.
 */
const WORD_MARKERS = [
  "<|system|>",
  "[INST]",
  "[/INST]",
  "<<SYS>>",
  "<</SYS>>",
  "IGNORE PREVIOUS INSTRUCTIONS",
  "IGNORE ALL PREVIOUS",
  "DISREGARD PREVIOUS",
  "NEW SYSTEM PROMPT:",
  "OVERRIDE:",
];

const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function tolerant(marker: string): string {
  return marker
    .split(/\s+/)
    .map((word) => escape(word))
    .join("\\s+");
}

const STRUCTURAL = [
  // ChatML, any role (and bare): <|im_start|>system, <|im_start|>user, <|im_end|>
  String.raw`<\|\s*im_start\s*\|>(?:\s*[a-z_]+)?`,
  String.raw`<\|\s*im_end\s*\|>`,
  // Llama 3 headers and end of turn.
  String.raw`<\|\s*start_header_id\s*\|>`,
  String.raw`<\|\s*end_header_id\s*\|>`,
  String.raw`<\|\s*eot_id\s*\|>`,
];

const PATTERN = new RegExp([...STRUCTURAL, ...WORD_MARKERS.map(tolerant)].join("|"), "gi");

export const SANITIZED = "[SANITIZED]";
export const DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024;

export interface SanitizeResult {
  text: string;
  sanitized: boolean;
  truncated: boolean;
}

/** Replaces every marker with [SANITIZED] and caps the result at `maxBytes` of UTF-8. */
export function sanitizeOutput(text: string, maxBytes = DEFAULT_MAX_OUTPUT_BYTES): SanitizeResult {
  let count = 0;
  const cleaned = text.replace(PATTERN, () => {
    count++;
    return SANITIZED;
  });
  const capped = capBytes(cleaned, maxBytes);
  return { text: capped.text, sanitized: count > 0, truncated: capped.truncated };
}

const TRUNCATION_NOTE = "…[truncated]";

function capBytes(text: string, maxBytes: number): { text: string; truncated: boolean } {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return { text, truncated: false };
  const room = Math.max(0, maxBytes - Buffer.byteLength(TRUNCATION_NOTE));
  // Decoding a cut buffer may end in a broken character; drop the replacement char it yields.
  const head = bytes
    .subarray(0, room)
    .toString("utf8")
    .replace(/\uFFFD$/, "");
  return { text: head + TRUNCATION_NOTE, truncated: true };
}
