import type { RunStatus } from "../contracts/run-status.js";

/**
 * A run and its descendants, as their statuses name their parents: parents before their children
 * (breadth first), the run first. Empty when no status names the run.
 */
export function runTree(runId: string, statuses: readonly RunStatus[]): RunStatus[] {
  const children = new Map<string, RunStatus[]>();
  let root: RunStatus | undefined;
  for (const status of statuses) {
    if (status.runId === runId) root = status;
    if (status.parentRunId === undefined) continue;
    const siblings = children.get(status.parentRunId);
    if (siblings) siblings.push(status);
    else children.set(status.parentRunId, [status]);
  }
  if (!root) return [];
  const tree = [root];
  const seen = new Set([runId]);
  for (let i = 0; i < tree.length; i++) {
    for (const child of children.get((tree[i] as RunStatus).runId) ?? []) {
      if (seen.has(child.runId)) continue;
      seen.add(child.runId);
      tree.push(child);
    }
  }
  return tree;
}
