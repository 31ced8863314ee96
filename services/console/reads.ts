/** What the console reads from the cluster: the status bucket, the run log and the rolls. */
import type { ActorBus } from "../../shared/bus/actor.js";
import { lastAuditEvent } from "../../shared/bus/audit.js";
import { scanLog } from "../../shared/bus/run-log.js";
import { readProgress, statusWithProgress, withProgress } from "../../shared/bus/run-progress.js";
import { readRunsBucket } from "../../shared/bus/run-status.js";
import { runTree } from "../../shared/bus/run-tree.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { RUN_ID_PATTERN } from "../../shared/runtime/ids.js";
import { readClusterHealth, type ClusterHealth } from "../cli/cluster-health.js";
import { openBreakers, type BreakerView } from "../cli/inspect.js";
import { LogWindow, type TimelinePage } from "./log-window.js";
import { runView, type RunView } from "./run-view.js";
import { filterRuns, type RunsFilter } from "./runs-filter.js";

const AGENT_READS_AT_ONCE = 32;

/** A run's place in its tree: its status and its agent. */
export type TreeNode = RunStatus & { agent?: string };

/** A runId from a URL: INVALID_INPUT unless it is one. */
export function checkRunId(runId: string): string {
  if (!RUN_ID_PATTERN.test(runId))
    throw new AgentError(
      "INVALID_INPUT",
      `'${runId.slice(0, 80)}' is not a runId: 1-64 characters of [A-Za-z0-9_-]`,
    );
  return runId;
}

export class ConsoleReads {
  /** A run's agent never changes: read once from its `run.admitted`. */
  private readonly agents = new Map<string, string>();

  constructor(
    private readonly bus: ActorBus,
    private readonly cluster: { replicas: number; listenMs: number },
  ) {}

  /** The runs the filter keeps, each with its agent and, running, its progress. */
  async runs(filter: RunsFilter): Promise<{ runs: TreeNode[]; more: number }> {
    const { statuses } = await readRunsBucket(this.bus);
    // Only the runs the bucket holds are remembered: retention removes the others' statuses.
    const held = new Set(statuses.map((s) => s.runId));
    for (const runId of this.agents.keys()) if (!held.has(runId)) this.agents.delete(runId);
    await this.learnAgents([...held]);
    const { runs, more } = filterRuns(statuses, this.agents, filter);
    const shown = await Promise.all(
      runs.map(async (run) => {
        const live =
          run.status === "running" ? withProgress(run, await readProgress(this.bus, run.runId)) : run;
        const agent = this.agents.get(run.runId);
        return agent === undefined ? live : { ...live, agent };
      }),
    );
    return { runs: shown, more };
  }

  /**
   * A run's view, its timeline a page of at most `page.limit` events after `page.afterSeq` (the
   * newest; `more` counts those left out before them): NOT_FOUND when neither its status nor its
   * log names it. The log is read message by message, never held whole.
   */
  async run(runId: string, page: TimelinePage): Promise<RunView & { more: number }> {
    checkRunId(runId);
    const window = new LogWindow(page.afterSeq, page.limit);
    const [status] = await Promise.all([
      statusWithProgress(this.bus, runId),
      (async () => {
        for await (const stored of scanLog(this.bus, runId)) window.add(stored.entry);
      })(),
    ]);
    if (!status && window.messages === 0)
      throw new AgentError("NOT_FOUND", `no run '${runId}': no status or log names it`);
    return { ...runView(runId, window.read(), status), more: window.more };
  }

  /** The tree a run is in, from its root: parents before children. */
  async tree(runId: string): Promise<{ rootRunId: string; runs: TreeNode[] }> {
    checkRunId(runId);
    const { statuses } = await readRunsBucket(this.bus);
    const own = statuses.find((s) => s.runId === runId);
    if (!own) throw new AgentError("NOT_FOUND", `no run '${runId}' in the status bucket`);
    const rootRunId = own.rootRunId ?? runId;
    const tree = runTree(rootRunId, statuses);
    await this.learnAgents(tree.map((s) => s.runId));
    return {
      rootRunId,
      runs: tree.map((s) => {
        const agent = this.agents.get(s.runId);
        return agent === undefined ? s : { ...s, agent };
      }),
    };
  }

  /** What `agentctl cluster` and `agentctl breakers` show. */
  async clusterView(): Promise<{ health: ClusterHealth; breakers: BreakerView[] }> {
    const [health, breakers] = await Promise.all([
      readClusterHealth(this.bus, this.cluster.replicas, this.cluster.listenMs),
      openBreakers(this.bus),
    ]);
    return { health, breakers };
  }

  /** Reads the agents not known yet, a few dozen at a time: a first listing of thousands is no burst. */
  private async learnAgents(runIds: string[]): Promise<void> {
    const unknown = runIds.filter((id) => !this.agents.has(id));
    for (let i = 0; i < unknown.length; i += AGENT_READS_AT_ONCE) {
      await Promise.all(
        unknown.slice(i, i + AGENT_READS_AT_ONCE).map(async (runId) => {
          const agent = (await lastAuditEvent(this.bus, runId, "run.admitted"))?.event.data?.agent;
          if (typeof agent === "string") this.agents.set(runId, agent);
        }),
      );
    }
  }
}
