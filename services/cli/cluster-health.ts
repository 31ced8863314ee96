import type { KV } from "@nats-io/kv";
import type { ActorBus } from "../../shared/bus/actor.js";
import { readKillSwitch } from "../../shared/bus/kill-switch.js";
import {
  readClusterState,
  type ClusterState,
  type Follower,
  type StoreHealth,
} from "../../shared/bus/cluster-state.js";
import { askTools, callCriticRoll, type CriticRoll, type ToolRoll } from "../../shared/bus/service-roll.js";
import { callSupervisorRoll, type SupervisorRoll } from "../../shared/bus/supervisor-roll.js";
import { listenForWorkers, type WorkerRoll } from "../../shared/bus/worker-roll.js";
import type { KillSwitchState, SupervisorHello } from "../../shared/contracts/cluster.js";
import { toAgentError } from "../../shared/runtime/errors.js";

export type { StoreHealth } from "../../shared/bus/cluster-state.js";

/**
 * The cluster's state, the supervisors, critics and workers heard, the tools asked, and what needs
 * an operator, one line each; none when healthy.
 */
export type ClusterHealth = ClusterState & {
  supervisors: SupervisorRoll;
  critics: CriticRoll;
  tools: ToolRoll;
  workers: WorkerRoll;
  killSwitch: KillSwitchReport;
  problems: string[];
};

/**
 * The kill switch as read: off when never set; else its last setting (on or off, who, why, when,
 * as `kill-switch` recorded it); or why it could not be read.
 */
export type KillSwitchReport = Partial<KillSwitchState> & { active: boolean; refused?: string };

/** At this share of the account's storage limit a write is about to be refused (STORAGE_FULL). */
export const STORAGE_WARN_SHARE = 0.9;

/** What the cluster looks like to this command now (actors heard within `listenMs`), and what needs an operator. */
export async function readClusterHealth(
  bus: ActorBus,
  wantedReplicas: number,
  listenMs: number,
  { critic = true }: { critic?: boolean } = {},
): Promise<ClusterHealth> {
  const [state, supervisors, critics, tools, workers, killSwitch] = await Promise.all([
    readClusterState(bus),
    callSupervisorRoll(bus.nc, bus.subjects, listenMs),
    callCriticRoll(bus.nc, bus.subjects, listenMs),
    askTools(bus.nc, bus.subjects, bus.jsm, listenMs),
    listenForWorkers(bus.nc, bus.subjects, listenMs, bus.clock),
    readKillSwitchReport(bus.buckets.pool),
  ]);
  const clustered = state.server.cluster !== undefined;
  return {
    ...state,
    supervisors,
    critics,
    tools,
    workers,
    killSwitch,
    problems: [
      ...killSwitchProblems(killSwitch),
      ...problemsOf(state.stores, { storage: state.storage, clustered }, wantedReplicas),
      ...supervisorProblems(supervisors),
      // A deployment whose runs never name a critic runs none (agentctl cluster --no-critic).
      ...(critic ? criticProblems(critics) : []),
      ...toolProblems(tools, bus.subjects.buckets()),
      ...workerProblems(state.jobs, workers),
      ...workerPolicyProblems(workers),
    ],
  };
}

/** The kill switch's last setting (see KillSwitchReport). */
export async function readKillSwitchReport(pool: KV): Promise<KillSwitchReport> {
  try {
    return (await readKillSwitch(pool)) ?? { active: false };
  } catch (err) {
    return { active: false, refused: toAgentError(err).message };
  }
}

/** The kill switch on: nothing is admitted and every running run halts, however sound the rest is. */
export function killSwitchProblems(report: KillSwitchReport): string[] {
  if (report.refused) return [`the kill switch could not be read: ${report.refused}`];
  if (!report.active) return [];
  return [
    `the kill switch is on${setBy(report)}: no run is admitted and running runs halt at their next step; \`agentctl kill-switch off\` lifts it, then \`agentctl resume\` continues the runs it halted`,
  ];
}

/** One line: on or off, and who set it so, why and when, if recorded. */
export function killSwitchLine(report: KillSwitchReport): string {
  if (report.refused) return "kill switch: not read (see the problems)";
  return `kill switch: ${report.active ? "ON" : "off"}${setBy(report)}`;
}

const setBy = ({ active, by, reason, at }: KillSwitchReport): string => {
  if (by === undefined) return "";
  const when = at === undefined ? "" : ` at ${new Date(at).toISOString()}`;
  return ` (${active ? "set" : "lifted"} by ${by}${when}${reason ? `: ${reason}` : ""})`;
};

/** The settings every supervisor replica must share, by the variable that sets them. */
const SHARED_SETTINGS: [string, (hello: SupervisorHello) => number][] = [
  ["SUPERVISOR_POOL_CAPACITY", (hello) => hello.poolCapacity],
  ["SUPERVISOR_MAX_DEPTH", (hello) => hello.maxDepth],
  ["SUPERVISOR_TREE_ITERATION_CAP", (hello) => hello.treeIterationCap],
  ["SUPERVISOR_STALL_MS", (hello) => hello.stallMs],
];

/**
 * No supervisor: nothing is admitted, no operator control is answered.
 * Replicas with different settings: they share the pool and write the trees' caps, so a run's
 * admission depends on which replica answers it.
 */
export function supervisorProblems(roll: SupervisorRoll): string[] {
  if (roll.refused) return [`the supervisors could not be asked: ${roll.refused}`];
  if (roll.supervisors.length === 0) {
    return [
      `no supervisor answered in ${seconds(roll.listenedMs)}: no run is admitted, and approvals, halts and cancels go unanswered; start one under this AGENTS_PREFIX, or see why it cannot reach NATS`,
    ];
  }
  const problems: string[] = [];
  for (const [name, valueOf] of SHARED_SETTINGS) {
    const byValue = Map.groupBy(roll.supervisors, valueOf);
    if (byValue.size < 2) continue;
    // The setting most replicas share first: the odd ones out are what an operator fixes.
    const values = [...byValue]
      .sort(([a, has], [b, other]) => other.length - has.length || String(a).localeCompare(String(b)))
      .map(([value, holders]) => `${value} (${holders.map((h) => h.instance).join(", ")})`);
    problems.push(
      `the supervisors disagree on ${name}: ${values.join(", ")}; they share the pool and the tree budgets, so a run is decided by whichever answers`,
    );
  }
  return problems;
}

/** No critic: every run with one waits at its review (a request nobody serves is asked again). */
export function criticProblems(roll: CriticRoll): string[] {
  if (roll.refused) return [`the critics could not be asked: ${roll.refused}`];
  if (roll.critics.length > 0) return [];
  return [
    `no critic answered in ${seconds(roll.listenedMs)}: every run with a critic waits at its review until one does; start one under this AGENTS_PREFIX, or see why it cannot reach NATS`,
  ];
}

/**
 * A tool some run has listed that no service answers now: started runs that call it wait for one
 * (see ToolCatalog), and a run not started yet starts without it. A tool retired on purpose stays
 * listed until its key is deleted from the workers' shared descriptors.
 */
export function toolProblems(roll: ToolRoll, names: { toolDescriptors: string }): string[] {
  if (roll.refused) return [`the tools could not be asked: ${roll.refused}`];
  if (roll.unlisted) return [`the tools could not be listed: ${roll.unlisted}`];
  return roll.tools
    .filter((tool) => !tool.answered)
    .map(
      (tool) =>
        `tool '${tool.name}': no service answered its describe in ${seconds(roll.listenedMs)}: started runs that call it wait for one and new runs start without it; start its service, or, if it was retired, delete its key from the ${names.toolDescriptors} bucket`,
    );
}

/** Jobs waiting with no worker to take them: none started, all gone, or none can reach NATS. */
export function workerProblems(jobs: ClusterState["jobs"], roll: WorkerRoll): string[] {
  if (roll.refused) return [`the agent workers could not be listed: ${roll.refused}`];
  const live = roll.workers.filter((worker) => !worker.leaving).length;
  if (!jobs || jobs.waiting === 0 || live > 0) return [];
  return [
    `${jobs.waiting} job(s) waiting and no agent worker heard in ${seconds(roll.listenedMs)}: start workers under this AGENTS_PREFIX, or see why they cannot reach NATS`,
  ];
}

/**
 * A convergence policy some live workers register and others do not: the supervisor refuses every
 * run naming it until all do (a job goes to whichever worker pulls first).
 */
export function workerPolicyProblems(roll: WorkerRoll): string[] {
  const live = roll.workers.filter((worker) => !worker.leaving);
  const names = [...new Set(live.flatMap((worker) => worker.policies ?? []))].sort();
  return names.flatMap((name) => {
    const lacking = live.filter((worker) => !(worker.policies ?? []).includes(name));
    if (lacking.length === 0) return [];
    const ids = [...new Set(lacking.map((worker) => worker.workerId))].sort().join(", ");
    return [
      `convergence policy '${name}' is not registered by agent worker(s) ${ids}: runs naming it are refused until every live worker registers it (AGENT_POLICY_MODULES)`,
    ];
  });
}

/** What needs an operator: a missing or under-replicated store, one without a leader or with a copy down, storage nearly full. */
export function problemsOf(
  stores: readonly StoreHealth[],
  { storage, clustered }: { storage: ClusterState["storage"]; clustered: boolean },
  wantedReplicas: number,
): string[] {
  // AGENTS_REPLICAS above 1 on a server not in a cluster never gets here: provisioning refuses it.
  const problems: string[] = [];
  // Checked against the other stores too: agentctl run with the default AGENTS_REPLICAS (1) is how
  // an operator finds the one bucket left R1 on an R3 cluster.
  const most = Math.max(0, ...stores.flatMap((store) => store.replicas ?? []));
  for (const store of stores) {
    if (store.replicas === undefined) {
      problems.push(`${store.name} is missing: start a supervisor under this AGENTS_PREFIX to create it`);
      continue;
    }
    if (store.replicas < wantedReplicas)
      problems.push(
        `${store.name} has ${store.replicas} replica(s), AGENTS_REPLICAS is ${wantedReplicas}: a supervisor started with it raises them`,
      );
    else if (store.replicas < most)
      problems.push(
        `${store.name} has ${store.replicas} replica(s) where others have ${most}: a supervisor started with AGENTS_REPLICAS=${most} raises it`,
      );
    if (clustered && store.replicas > 1 && !store.leader)
      problems.push(`${store.name} has no leader: its servers are electing one, or too few of them are up`);
    for (const peer of store.followers) {
      if (peer.offline) problems.push(`${store.name}: its copy on ${peer.server} is offline`);
      else if (!peer.current) problems.push(`${store.name}: its copy on ${peer.server} is ${behind(peer)}`);
    }
  }
  if (storage.limit !== undefined && storage.used >= storage.limit * STORAGE_WARN_SHARE)
    problems.push(
      `JetStream storage ${formatBytes(storage.used)} of the account's ${formatBytes(storage.limit)}: writes are refused (STORAGE_FULL) when it is full`,
    );
  return problems;
}

/** The report as text: one line per store, then the work queue and the workers, then the problems. */
export function healthLines(health: ClusterHealth): string[] {
  const { server, storage, stores, jobs, problems } = health;
  const lines = [
    `nats-server ${server.version}${server.cluster ? ` (cluster ${server.cluster})` : ""}; JetStream storage ${formatBytes(storage.used)}${storage.limit === undefined ? " (no account limit)" : ` of ${formatBytes(storage.limit)}`}`,
    killSwitchLine(health.killSwitch),
  ];
  const width = Math.max(...stores.map((store) => store.name.length));
  for (const store of stores) {
    if (store.replicas === undefined) {
      lines.push(`${store.name.padEnd(width)}  missing`);
      continue;
    }
    const copies = store.leader
      ? `  leader ${store.leader}${store.followers.map((peer) => `, ${peer.server} ${peerState(peer)}`).join("")}`
      : "";
    lines.push(
      `${store.name.padEnd(width)}  R${store.replicas}  ${store.messages ?? 0} msgs  ${formatBytes(store.bytes ?? 0)}${copies}`,
    );
  }
  lines.push(
    jobs
      ? `jobs: ${jobs.waiting} waiting, ${jobs.held} held by workers, ${jobs.redelivered} redelivered, ${jobs.pulls} open pulls`
      : "jobs: no worker has started yet (the workers' consumer does not exist)",
    ...supervisorLines(health.supervisors),
    ...criticLines(health.critics),
    toolLine(health.tools),
    ...workerLines(health.workers),
  );
  if (problems.length === 0) lines.push("healthy");
  else lines.push(`${problems.length} problem(s):`, ...problems.map((problem) => `  - ${problem}`));
  return lines;
}

/** A line for the roll call, then one per supervisor that answered. */
function supervisorLines(roll: SupervisorRoll): string[] {
  if (roll.refused) return ["supervisors: not asked (see the problems)"];
  const heard = `answered in ${seconds(roll.listenedMs)}`;
  if (roll.supervisors.length === 0) return [`supervisors: none ${heard}`];
  return [
    `supervisors: ${roll.supervisors.length} ${heard}`,
    ...roll.supervisors.map(
      (s) =>
        `  ${s.instance}  pool ${s.poolCapacity}, depth ${s.maxDepth}, tree cap ${s.treeIterationCap}, stall ${seconds(s.stallMs)}; up since ${new Date(s.startedAt).toISOString()}`,
    ),
  ];
}

/** A line for the roll call, then one per critic that answered. */
function criticLines(roll: CriticRoll): string[] {
  if (roll.refused) return ["critics: not asked (see the problems)"];
  const heard = `answered in ${seconds(roll.listenedMs)}`;
  if (roll.critics.length === 0) return [`critics: none ${heard}`];
  return [
    `critics: ${roll.critics.length} ${heard}`,
    ...roll.critics.map((c) => `  ${c.instance}  up since ${new Date(c.startedAt).toISOString()}`),
  ];
}

/** One line: each tool the workers know of, served or not. */
function toolLine(roll: ToolRoll): string {
  if (roll.refused || roll.unlisted) return "tools: not asked (see the problems)";
  if (roll.tools.length === 0)
    return "tools: none described yet (the workers describe a tool when a run first lists it)";
  const served = roll.tools.filter((tool) => tool.answered).length;
  const each = roll.tools.map((tool) => `${tool.name}${tool.answered ? "" : " (no service)"}`).join(", ");
  return `tools: ${served} of ${roll.tools.length} served: ${each}`;
}

/** A line for the roll, then one per worker heard. */
function workerLines(roll: WorkerRoll): string[] {
  if (roll.refused) return ["workers: not listed (see the problems)"];
  const heard = `heard in ${seconds(roll.listenedMs)}`;
  if (roll.workers.length === 0) return [`workers: none ${heard}`];
  const width = Math.max(...roll.workers.map((worker) => worker.workerId.length));
  return [
    `workers: ${roll.workers.length} ${heard}`,
    ...roll.workers.map(
      (w) =>
        `  ${w.workerId.padEnd(width)}  ${w.jobs} job(s)${w.leaving ? "  leaving" : ""}  instance ${w.instance}${w.policies ? `  policies ${w.policies.join(", ")}` : ""}`,
    ),
  ];
}

const seconds = (ms: number): string => `${(ms / 1_000).toFixed(1)} s`;

function peerState(peer: Follower): string {
  if (peer.offline) return "offline";
  return peer.current ? "current" : behind(peer);
}

/** A copy that is not current: by how much, and since when, as far as the leader knows. */
function behind(peer: Follower): string {
  const known = [
    ...(peer.lag ? [`${peer.lag} operations behind`] : []),
    ...(peer.lastHeardMs !== undefined ? [`last heard ${seconds(peer.lastHeardMs)} ago`] : []),
  ];
  return `not current${known.length > 0 ? ` (${known.join(", ")})` : ""}`;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}
