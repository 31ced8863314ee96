import type { SampleMatch } from "../contracts/run-spec.js";
import { canonicalJson } from "../runtime/canonical-json.js";
import { normalizeText } from "./repair.js";

/** Answers that agree under a SampleMatch: the samples in it, numbered from 1 in the order asked. */
export interface AnswerCluster {
  key: string;
  samples: number[];
}

export interface Clustering {
  /** In the order of their first sample. */
  clusters: AnswerCluster[];
  /** Samples that proposed no answer (tool calls, a cut reply): counted in the total, in no cluster. */
  abstained: number[];
  /** Index into `clusters` of the majority: the largest, the earliest on a tie. */
  chosen: number;
  /** The majority's size over every sample asked, abstentions included. */
  agreement: number;
}

/**
 * What two answers must share to agree. A JSON field is compared as canonical JSON; an answer
 * that is not JSON, or lacks the field, agrees only with the same text.
 */
export function answerKey(answer: string, match: SampleMatch = "exact"): string {
  if (match === "exact") return `text:${answer}`;
  if (match === "normalized") return `text:${normalizeText(answer)}`;
  const value = fieldOf(answer, match.jsonField);
  return value === undefined ? `text:${answer}` : `json:${canonicalJson(value)}`;
}

function fieldOf(answer: string, path: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(answer) as unknown;
  } catch {
    return undefined;
  }
  for (const name of path.split(".")) {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[name];
  }
  return value;
}

/**
 * Majority voting over a round's answers (null for a sample with none). A tie goes to the cluster
 * asked first, so the same answers always choose the same one.
 */
export function clusterAnswers(answers: readonly (string | null)[], match?: SampleMatch): Clustering {
  const clusters: AnswerCluster[] = [];
  const abstained: number[] = [];
  answers.forEach((answer, i) => {
    if (answer === null) {
      abstained.push(i + 1);
      return;
    }
    const key = answerKey(answer, match);
    const cluster = clusters.find((c) => c.key === key);
    if (cluster) cluster.samples.push(i + 1);
    else clusters.push({ key, samples: [i + 1] });
  });
  let chosen = 0;
  clusters.forEach((c, i) => {
    if (c.samples.length > (clusters[chosen]?.samples.length ?? 0)) chosen = i;
  });
  const size = clusters[chosen]?.samples.length ?? 0;
  return { clusters, abstained, chosen, agreement: answers.length > 0 ? size / answers.length : 0 };
}
