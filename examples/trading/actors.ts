import { join } from "node:path";
import type { ActorLaunch } from "../../services/local/cluster.js";
import { repoRoot } from "../../services/local/paths.js";

const entry = (actor: string): string => join(repoRoot(), "dist", "examples", "trading", actor, "main.js");

/**
 * The example's two actors as the local launcher starts them, from their compiled entries: the
 * executor (a tool service, configured by `executorEnv`) and the planner (a model actor). Both
 * connect as the tool user, as any user's tool service does.
 */
export function tradingActors(executorEnv: Record<string, string> = {}): ActorLaunch[] {
  return [
    { name: "trading-executor", entry: entry("executor"), user: "tools", env: executorEnv },
    { name: "trading-planner", entry: entry("planner"), user: "tools" },
  ];
}
