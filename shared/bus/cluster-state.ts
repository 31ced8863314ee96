import {
  JetStreamApiCodes,
  JetStreamApiError,
  type ClusterInfo,
  type ConsumerInfo,
  type JetStreamAccountStats,
  type JetStreamManager,
  type PeerInfo,
  type StreamInfo,
} from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { WORKER_CONSUMER } from "./jobs.js";
import { streamInfoIfAny } from "./provision.js";
import type { StoreName, Subjects } from "./subjects.js";

/** One stream, or one bucket's stream, as the JetStream cluster holds it now. */
export interface StoreHealth {
  name: string;
  kind: StoreName["kind"];
  /** Undefined when it does not exist. */
  replicas?: number;
  messages?: number;
  bytes?: number;
  /** The server leading it (a clustered JetStream only). */
  leader?: string;
  /** Its other copies: offline, or behind the leader, is what an operator looks for. */
  followers: Follower[];
}

/** A copy of a store on another server than its leader's, as the leader sees it. */
export interface Follower {
  server: string;
  current: boolean;
  offline: boolean;
  /** Operations behind the leader, when the server says. */
  lag?: number;
  /** Since the leader last heard from it. */
  lastHeardMs?: number;
}

/** The work queue seen through the workers' shared consumer. */
export interface JobsHealth {
  waiting: number;
  held: number;
  redelivered: number;
  /** Pulls open now: roughly the workers with room for a job. */
  pulls: number;
}

/** What the JetStream cluster holds for this prefix now: what `agentctl cluster` and the supervisor's gauges read. */
export interface ClusterState {
  server: { version: string; cluster?: string };
  /** The account's JetStream file storage; `limit` when the account has one. */
  storage: { used: number; limit?: number };
  stores: StoreHealth[];
  /** Undefined before any worker has started (it creates the consumer). */
  jobs?: JobsHealth;
}

/** The streams, buckets (their streams), storage and work queue, read in one round of requests. */
export async function readClusterState(deps: {
  nc: NatsConnection;
  jsm: JetStreamManager;
  subjects: Subjects;
}): Promise<ClusterState> {
  const { nc, jsm, subjects } = deps;
  const stores = subjects.stores();
  const [account, infos, consumer] = await Promise.all([
    jsm.getAccountInfo(),
    Promise.all(stores.map(({ name }) => streamInfoIfAny(jsm, name))),
    consumerInfoIfAny(jsm, subjects.streams().runs, WORKER_CONSUMER),
  ]);
  const jobs: JobsHealth | undefined = consumer && {
    waiting: consumer.num_pending,
    held: consumer.num_ack_pending,
    redelivered: consumer.num_redelivered,
    pulls: consumer.num_waiting,
  };
  return {
    server: {
      version: nc.info?.version ?? "unknown",
      ...(nc.info?.cluster ? { cluster: nc.info.cluster } : {}),
    },
    storage: storageOf(account),
    stores: stores.map(({ name, kind }, i) =>
      storeHealth(name, kind, infos[i], nc.info?.cluster !== undefined),
    ),
    ...(jobs ? { jobs } : {}),
  };
}

/** How many copies of a store are current: its leader's and every follower's that is; 1 on a single server. */
export function currentCopies(store: StoreHealth, clustered: boolean): number {
  if (store.replicas === undefined) return 0;
  if (!clustered) return 1;
  return (store.leader ? 1 : 0) + store.followers.filter((peer) => peer.current && !peer.offline).length;
}

function storageOf(account: JetStreamAccountStats): ClusterState["storage"] {
  const limit = account.limits.max_storage;
  return { used: account.storage, ...(limit > 0 ? { limit } : {}) };
}

/** A single server names itself the leader of every stream: only a cluster's leader is reported. */
function storeHealth(
  name: string,
  kind: StoreHealth["kind"],
  info: StreamInfo | undefined,
  clustered: boolean,
): StoreHealth {
  if (!info) return { name, kind, followers: [] };
  const cluster: ClusterInfo | undefined = clustered ? info.cluster : undefined;
  return {
    name,
    kind,
    replicas: info.config.num_replicas,
    messages: info.state.messages,
    bytes: info.state.bytes,
    ...(cluster?.leader ? { leader: cluster.leader } : {}),
    followers: (cluster?.replicas ?? []).map(followerOf),
  };
}

/** The server may leave out what it does not know of a peer (`offline`, `lag`). */
function followerOf(peer: PeerInfo): Follower {
  const { lag, active } = peer as Partial<PeerInfo>;
  return {
    server: peer.name,
    current: peer.current,
    offline: peer.offline === true,
    ...(lag !== undefined ? { lag } : {}),
    ...(active !== undefined ? { lastHeardMs: Math.round(active / 1_000_000) } : {}),
  };
}

/** A consumer's info, or undefined when it (or its stream) does not exist (only those answers say so). */
async function consumerInfoIfAny(
  jsm: JetStreamManager,
  stream: string,
  name: string,
): Promise<ConsumerInfo | undefined> {
  return jsm.consumers.info(stream, name).catch((err: unknown) => {
    const missing = [JetStreamApiCodes.ConsumerNotFound, JetStreamApiCodes.StreamNotFound] as number[];
    if (err instanceof JetStreamApiError && missing.includes(err.code)) return undefined;
    throw err;
  });
}
