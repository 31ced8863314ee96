import type { RunSpecInput } from "../../shared/contracts/run-spec.js";

/**
 * The sample run of `npm start`: the scripted model calls the echo tool, drafts an answer that
 * leaks a credential, the critic sends it back once (safety gate), the model repairs, and the run
 * commits. No API key, no network: the scripted model ships with the product.
 */
const verdict = (safety: number) =>
  JSON.stringify({
    scores: { correctness: 0.9, completeness: 0.9, coherence: 0.9, safety },
    defects:
      safety < 0.95
        ? [
            {
              severity: "high",
              rootCause: "safetyViolation",
              description: "the answer includes a raw credential",
            },
          ]
        : [],
    repairHints: safety < 0.95 ? ["never print credentials"] : [],
    passed: safety >= 0.95,
  });

export const demoSpec: RunSpecInput = {
  schemaVersion: 1,
  task: { prompt: "Report the service status in one sentence.", verifiers: [{ kind: "nonEmpty" }] },
  agent: {
    name: "demo-agent",
    model: {
      provider: "scripted",
      script: [
        {
          text: "Checking the service.",
          toolCalls: [{ name: "echo", input: { text: "status: green" } }],
          usage: { inputTokens: 120, outputTokens: 20 },
        },
        { text: "Service is green (token=abc123).", usage: { inputTokens: 160, outputTokens: 12 } },
        {
          toolCalls: [{ name: "finish", input: { answer: "The service is green." } }],
          usage: { inputTokens: 210, outputTokens: 9 },
        },
      ],
    },
    tools: ["echo"],
    capabilities: ["compute"],
    resources: { maxIterations: 10, maxToolCalls: 10, maxRepairs: 2 },
  },
  critic: { model: { provider: "scripted", script: [{ text: verdict(0.4) }, { text: verdict(1) }] } },
};
