import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { AgentEnv } from "../../services/agent/env.js";
import { AgentctlEnv } from "../../services/cli/command-kit.js";
import { ConsoleEnv } from "../../services/console/env.js";
import { CriticEnv } from "../../services/critic/env.js";
import { SupervisorEnv } from "../../services/supervisor/env.js";
import { McpEnv } from "../../services/mcp/env.js";
import { ToolsEnv } from "../../services/tools/env.js";
import { ActorEnv } from "../../shared/runtime/config.js";
import { envTable, undescribed } from "../helpers/reference/env-page.js";

/** Each actor's own variables, after the ones every actor reads: its heading, schema and notes. */
const ACTORS: { heading: string; file: string; schema: z.ZodObject; notes?: string }[] = [
  { heading: "Supervisor", file: "services/supervisor/env.ts", schema: SupervisorEnv },
  {
    heading: "Agent worker",
    file: "services/agent/env.ts",
    schema: AgentEnv,
    notes:
      "A model's key is read from the variable its ModelRef's `apiKeyEnv` names (`OPENAI_API_KEY` or\n`ANTHROPIC_API_KEY` unless it names another), on the agent workers and the critic alike, and\nonly among those `MODEL_KEY_ENVS` allows.",
  },
  { heading: "Critic", file: "services/critic/env.ts", schema: CriticEnv },
  { heading: "Tool services", file: "services/tools/env.ts", schema: ToolsEnv },
  { heading: "MCP bridge", file: "services/mcp/env.ts", schema: McpEnv },
  {
    heading: "Web console",
    file: "services/console/env.ts",
    schema: ConsoleEnv,
    notes: "How to reach it, its pages and its API: [Web console](console.md).",
  },
  {
    heading: "agentctl",
    file: "services/cli/command-kit.ts",
    schema: AgentctlEnv,
    notes:
      "agentctl reads the connection's variables above (`NATS_*`, `AGENTS_PREFIX`, `AGENTS_REPLICAS`;\n`LOG_LEVEL` `info` writes only its errors). With `NATS_URL` unset, in a checkout whose\n`npm run cluster` is up, it connects to that cluster as its `cli` user through\n`.cache/local-cluster.json`, which `AGENTS_LOCAL_CLUSTER_FILE` moves. `--by` defaults to `USER`.",
  },
];

const PREAMBLE = `# Configuration

Every actor reads its settings from environment variables, parsed once at start-up: a bad value
stops it with every problem listed (\`INVALID_INPUT\`). Generated from the actors' schemas
(\`shared/runtime/config.ts\` and each actor's \`env.ts\`) by
\`test/unit/configuration-reference.test.ts\`, which fails when this page is stale or a variable has
no description (\`-u\` writes it anew). How to start the actors: [Running a cluster](running-a-cluster.md);
the Kubernetes manifests that set these: [Deploying](deploying.md).`;

function page(): string {
  return [
    PREAMBLE,
    "",
    "## Every actor",
    "",
    ...envTable(ActorEnv),
    "",
    ...ACTORS.flatMap(({ heading, file, schema, notes }) => [
      `## ${heading}`,
      "",
      `\`${file}\`, besides the variables every actor reads:`,
      "",
      ...envTable(schema, ActorEnv),
      "",
      ...(notes ? [notes, ""] : []),
    ]),
  ].join("\n");
}

describe("docs/configuration.md, every actor's environment", () => {
  it("is the one the env schemas make (`-u` writes it anew)", async () => {
    const text = page();
    expect(text).toMatch(/^\| `SUPERVISOR_STALL_MS` \| `600000` \(10 min\) \| How long/m);
    // A default computed on the machine is shown as the docs say it, not as this machine's.
    expect(text).toMatch(/^\| `WORKER_ID` \| `<hostname>-<pid>` \|/m);
    await expect(text).toMatchFileSnapshot("../../docs/configuration.md");
  });

  it("describes every variable of every actor (a new one without a description fails here)", () => {
    const missing = [ActorEnv, ...ACTORS.map((a) => a.schema)].flatMap(undescribed);
    expect(missing).toEqual([]);
  });
});
