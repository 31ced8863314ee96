import type { Defect, RootCause } from "../contracts/rubric.js";

export type RepairStrategy = "minimalEdit" | "sectionRewrite" | "fullRegeneration";
export const STRATEGY_ORDER: readonly RepairStrategy[] = [
  "minimalEdit",
  "sectionRewrite",
  "fullRegeneration",
];

export const SIMILARITY_THRESHOLD = 0.9;

export interface RepairAttempt {
  output: string;
  diagnosis: string;
  strategy: RepairStrategy;
  loopDetected: boolean;
}

export interface RepairPlan {
  strategy: RepairStrategy;
  diagnosis: string;
  loopDetected: boolean;
  /** True when a semantic loop persists after one escalation: a human or FAIL must take over. */
  giveUp: boolean;
}

/** Causes that taint the whole output: only regenerating it from scratch is safe. */
const GLOBAL_CAUSES: ReadonlySet<RootCause> = new Set(["safetyViolation", "hallucination"]);
/** Causes that usually span a section: reasoning, structure or missing evidence. */
const SECTION_CAUSES: ReadonlySet<RootCause> = new Set(["logicError", "incoherence", "retrievalGap"]);

/** The strategy follows the defect: severity first, then the root cause. */
export function chooseStrategy(defects: readonly Defect[]): RepairStrategy {
  const rank = (d: Defect): number => {
    if (d.severity === "critical" || GLOBAL_CAUSES.has(d.rootCause)) return 2;
    if (d.severity === "high" || SECTION_CAUSES.has(d.rootCause)) return 1;
    return 0;
  };
  const worst = defects.reduce((max, d) => Math.max(max, rank(d)), 0);
  return STRATEGY_ORDER[worst] as RepairStrategy;
}

export function stronger(strategy: RepairStrategy): RepairStrategy {
  const index = STRATEGY_ORDER.indexOf(strategy);
  return STRATEGY_ORDER[Math.min(index + 1, STRATEGY_ORDER.length - 1)] as RepairStrategy;
}

export function normalizeText(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s]/gu, " ")
    .replace(/\s+/g, " ")
    .trim();
}

function bigrams(text: string): Map<string, number> {
  const grams = new Map<string, number>();
  const padded = ` ${normalizeText(text)} `;
  for (let i = 0; i < padded.length - 1; i++) {
    const gram = padded.slice(i, i + 2);
    grams.set(gram, (grams.get(gram) ?? 0) + 1);
  }
  return grams;
}

/** Sørensen–Dice similarity over character bigrams of the normalised texts, in [0, 1]. */
export function similarity(a: string, b: string): number {
  if (normalizeText(a) === normalizeText(b)) return 1;
  const x = bigrams(a);
  const y = bigrams(b);
  let overlap = 0;
  for (const [gram, count] of x) overlap += Math.min(count, y.get(gram) ?? 0);
  const total = [...x.values(), ...y.values()].reduce((s, n) => s + n, 0);
  return total === 0 ? 0 : (2 * overlap) / total;
}

export function diagnose(defects: readonly Defect[], hints: readonly string[]): string {
  const parts = defects.map(
    (d) => `${d.severity} ${d.rootCause}${d.location ? ` at ${d.location}` : ""}: ${d.description}`,
  );
  return [...parts, ...hints.map((h) => `hint: ${h}`)].join("\n");
}

/**
 * Picks the repair strategy. If this output and its diagnosis come back nearly the same as an
 * earlier pair, the last strategy did not work: go one stronger. If that happens again, give up.
 */
export function planRepair(
  defects: readonly Defect[],
  hints: readonly string[],
  output: string,
  history: readonly RepairAttempt[],
  threshold = SIMILARITY_THRESHOLD,
): RepairPlan {
  const diagnosis = diagnose(defects, hints);
  const base = chooseStrategy(defects);
  const repeated = history.find(
    (h) => similarity(h.output, output) >= threshold && similarity(h.diagnosis, diagnosis) >= threshold,
  );
  if (!repeated) return { strategy: base, diagnosis, loopDetected: false, giveUp: false };
  const previous = history.at(-1) ?? repeated;
  const escalated = stronger(previous.strategy);
  const rankOf = (s: RepairStrategy): number => STRATEGY_ORDER.indexOf(s);
  const strategy = rankOf(escalated) > rankOf(base) ? escalated : base;
  // A loop caught right after the previous escalation means the stronger strategy did not help either.
  return { strategy, diagnosis, loopDetected: true, giveUp: previous.loopDetected };
}

const INSTRUCTIONS: Record<RepairStrategy, string> = {
  minimalEdit: "Make the smallest edit that fixes the defects below; keep everything else exactly as it is.",
  sectionRewrite: "Rewrite the affected sections to fix the defects below; keep the unaffected parts.",
  fullRegeneration:
    "Discard the previous answer and produce a new one from scratch that avoids the defects below.",
};

/** The repair request to the generator: defects and hints only, never the critic's own context. */
export function repairPrompt(strategy: RepairStrategy, diagnosis: string, feedback?: string): string {
  const lines = [
    `Repair (${strategy}). ${INSTRUCTIONS[strategy]}`,
    "",
    "Defects:",
    diagnosis || "(none stated)",
  ];
  if (feedback) lines.push("", `Reviewer feedback: ${feedback}`);
  return lines.join("\n");
}
