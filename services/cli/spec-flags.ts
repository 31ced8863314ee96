import { AgentError } from "../../shared/runtime/errors.js";

/** The flags `agentctl submit` accepts instead of a spec file. */
export interface SpecFlags {
  prompt?: string;
  name: string;
  /** `scripted:<answer>`, `openai:<model>[@<baseUrl>]` or `anthropic:<model>`. */
  model: string;
  tools: string;
  capabilities: string;
  maxIterations?: number;
  maxToolCalls?: number;
  /** 0: unlimited. */
  maxCostUsd?: number;
  maxTokensBudget?: number;
  deadlineMs?: number;
  requiresApproval?: boolean;
  pattern?: string;
  /** The agent's privacy tier; the RunSpec's default (sovereign) when not given. */
  privacy?: string;
}

/** The run's budgets the flags may set (the RunSpec's `agent.resources`); the rest keep their defaults. */
const BUDGETS = ["maxIterations", "maxToolCalls", "maxCostUsd", "maxTokensBudget", "deadlineMs"] as const;

/** Flags that shape a spec: with a spec file they would be ignored, so they are refused instead. */
export const SPEC_FLAGS: readonly (keyof SpecFlags)[] = [
  "prompt",
  "name",
  "model",
  "tools",
  "capabilities",
  "requiresApproval",
  "pattern",
  "privacy",
  ...BUDGETS,
];

/**
 * A RunSpec from command-line flags, for quick runs without a file. Convergence is explicit as
 * always: the answer must be non-empty, and match `--pattern` when given.
 */
export function specFromFlags(flags: SpecFlags): Record<string, unknown> {
  if (!flags.prompt) throw new AgentError("INVALID_INPUT", "give a spec file, or --prompt with the task");
  const list = (csv: string): string[] =>
    csv
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  return {
    schemaVersion: 1,
    task: {
      prompt: flags.prompt,
      verifiers: [
        { kind: "nonEmpty" },
        ...(flags.pattern ? [{ kind: "regex", pattern: flags.pattern }] : []),
      ],
      ...(flags.requiresApproval ? { requiresApproval: true } : {}),
    },
    agent: {
      name: flags.name,
      model: modelRef(flags.model),
      tools: list(flags.tools),
      capabilities: list(flags.capabilities),
      ...(flags.privacy ? { privacy: flags.privacy } : {}),
      ...budgets(flags),
    },
  };
}

function budgets(flags: SpecFlags): { resources?: Record<string, number> } {
  const set = BUDGETS.flatMap((key) => (flags[key] === undefined ? [] : [[key, flags[key]] as const]));
  return set.length > 0 ? { resources: Object.fromEntries(set) } : {};
}

function modelRef(value: string): Record<string, unknown> {
  const colon = value.indexOf(":");
  const provider = colon < 0 ? value : value.slice(0, colon);
  const rest = colon < 0 ? "" : value.slice(colon + 1);
  if (provider === "scripted") return { provider, script: [{ text: rest || "done" }] };
  if (provider === "anthropic" && rest) return { provider, model: rest };
  if (provider === "openai" && rest) {
    const at = rest.indexOf("@");
    return at < 0
      ? { provider, model: rest }
      : { provider, model: rest.slice(0, at), baseUrl: rest.slice(at + 1) };
  }
  throw new AgentError(
    "INVALID_INPUT",
    `--model '${value}': use scripted:<answer>, openai:<model>[@<baseUrl>] or anthropic:<model>`,
  );
}
