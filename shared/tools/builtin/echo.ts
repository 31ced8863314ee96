import { z } from "zod";
import { defineTool } from "../tool.js";

export const EchoInput = z.object({ text: z.string() });
export type EchoInput = z.infer<typeof EchoInput>;

/** Returns its input: the smallest real tool, for demos, tests and benchmarks. */
export const echoTool = defineTool({
  name: "echo",
  description: "Returns the given text unchanged.",
  input: EchoInput,
  capability: { kind: "compute" },
  reversibility: "pure",
  idempotent: true,
  execute: (input) => Promise.resolve({ output: { text: input.text } }),
});
