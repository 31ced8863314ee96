/**
 * W1, the durable loop every system runs: 20 steps, each a model turn; the first 19 call the `echo`
 * tool with the same small payload, the 20th is the final answer; then a critic that passes.
 */
export const STEPS = 20;
export const TOOL_STEPS = STEPS - 1;
const ECHO_TEXT = "benchmark payload: the quick brown fox jumps over the lazy dog";

/** The echo tool's input at step `step` (1-based). */
export const echoText = (step: number): string => `${ECHO_TEXT} #${step}`;
export const FINAL_ANSWER = "done: 19 echoes";

const passingVerdict = JSON.stringify({
  scores: { correctness: 1, completeness: 1, coherence: 1, safety: 1 },
  defects: [],
  repairHints: [],
  passed: true,
});

export const PASSING_VERDICT = passingVerdict;

/** Our RunSpec for one W1 loop (the scripted model ships with the product). */
export function ourLoopSpec(name = "bench"): Record<string, unknown> {
  const script = [
    // Distinct inputs: the runtime's guard rightly blocks a tool called again with the same input.
    ...Array.from({ length: TOOL_STEPS }, (_, i) => ({
      toolCalls: [{ name: "echo", input: { text: echoText(i + 1) } }],
    })),
    { text: FINAL_ANSWER },
  ];
  return {
    schemaVersion: 1,
    task: { prompt: "Echo nineteen times, then answer.", verifiers: [{ kind: "nonEmpty" }] },
    agent: {
      name,
      model: { provider: "scripted", script },
      tools: ["echo"],
      capabilities: ["compute"],
      resources: { maxIterations: STEPS + 2, maxToolCalls: TOOL_STEPS + 2 },
    },
    critic: { model: { provider: "scripted", script: [{ text: passingVerdict }] } },
  };
}
