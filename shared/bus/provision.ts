import {
  JetStreamApiCodes,
  JetStreamApiError,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  StoreCompression,
  type JetStreamManager,
  type StreamConfig,
  type StreamInfo,
} from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { AgentError } from "../runtime/errors.js";
import { requireSupportedServer } from "./server-version.js";
import { REDACTED_INPUTS_MAX_AGE_MS } from "./redacted-inputs.js";
import { bucketStream, type Subjects } from "./subjects.js";

export interface ProvisionOptions {
  subjects: Subjects;
  /** 1 on a single local server, 3 in production. */
  replicas: number;
}

export type ProvisionAction = "created" | "updated" | "unchanged";

export interface ProvisionReport {
  serverVersion: string;
  streams: Record<string, ProvisionAction>;
  /** By bucket name (its stream is `KV_<name>`). */
  buckets: Record<string, ProvisionAction>;
  /**
   * Said once at start-up rather than discovered in production: features this server lacks, and
   * replicas kept above AGENTS_REPLICAS.
   */
  notes: string[];
}

const NANOS_PER_MS = 1_000_000;
/** Message-id dedupe window for WAL appends and run submissions. */
export const DUPLICATE_WINDOW_MS = 120_000;

type WantedStream = Partial<StreamConfig> & { name: string };

interface Where {
  clustered: boolean;
  notes: string[];
  /** The most replicas any of this prefix's streams and buckets has now (0 when none exists). */
  siblingReplicas: () => Promise<number>;
}

export function streamConfigs(subjects: Subjects, replicas: number): WantedStream[] {
  const names = subjects.streams();
  const common = {
    storage: StorageType.File,
    num_replicas: replicas,
    duplicate_window: DUPLICATE_WINDOW_MS * NANOS_PER_MS,
  };
  return [
    { ...common, name: names.runs, subjects: [subjects.runQueueAll()], retention: RetentionPolicy.Workqueue },
    {
      // The run log: read with batched direct gets (see readRange); its JSON compresses to ~0.4x
      // once a block is sealed. Nothing is ever removed by hand: what it keeps, it keeps until its
      // max_age (SUPERVISOR_LOG_MAX_AGE_MS).
      ...common,
      name: names.log,
      subjects: [subjects.logAll(), subjects.rejectedAll()],
      retention: RetentionPolicy.Limits,
      allow_direct: true,
      compression: StoreCompression.S2,
      deny_delete: true,
      deny_purge: true,
    },
    {
      // Run trees' counters: workers add to them with `Nats-Incr` publishes, the supervisor reads
      // them with direct gets. A counter's last message holds its total, so one is all it keeps.
      ...common,
      name: names.counters,
      subjects: [subjects.countersAll()],
      retention: RetentionPolicy.Limits,
      allow_msg_counter: true,
      allow_direct: true,
      max_msgs_per_subject: 1,
    },
  ];
}

/** The fields we set, and so the ones that must read back the same (servers drop options they do not know). */
const CHECKED: (keyof StreamConfig)[] = [
  "subjects",
  "retention",
  "storage",
  "num_replicas",
  "duplicate_window",
  "deny_delete",
  "deny_purge",
  "allow_direct",
  "compression",
  "allow_msg_counter",
  "max_msgs_per_subject",
];

function differences(wanted: Partial<StreamConfig>, actual: StreamConfig): string[] {
  return CHECKED.filter(
    (key) => key in wanted && JSON.stringify(wanted[key]) !== JSON.stringify(actual[key]),
  ).map(
    (key) =>
      `${String(key)}: wanted ${JSON.stringify(wanted[key])}, server has ${JSON.stringify(actual[key])}`,
  );
}

/**
 * A stream's info, or undefined when it does not exist. Only "not found" says so: a timeout (a
 * JetStream cluster without a quorum) taken for it sent a create for a stream that existed, and the
 * actor stopped on "stream name already in use with a different configuration" (INTERNAL).
 */
export async function streamInfoIfAny(jsm: JetStreamManager, name: string): Promise<StreamInfo | undefined> {
  return jsm.streams.info(name).catch((err: unknown) => {
    if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) return undefined;
    throw err;
  });
}

/**
 * Keeps the replicas an existing stream has when fewer are wanted: an actor or an agentctl started
 * with the default AGENTS_REPLICAS (1) against a cluster provisioned with 3 scaled its streams down
 * to one copy, silently. More replicas are still taken (moving a cluster to R3); fewer only by hand.
 */
function keepingReplicas(
  wanted: WantedStream,
  existing: StreamConfig | undefined,
  { notes }: Where,
): WantedStream {
  const has = existing?.num_replicas ?? 0;
  if (wanted.num_replicas === undefined || has <= wanted.num_replicas) return wanted;
  notes.push(
    `stream ${wanted.name} has ${has} replicas and AGENTS_REPLICAS is ${wanted.num_replicas}: kept ${has} (lowering replicas is an operator's change, made with the nats CLI)`,
  );
  return { ...wanted, num_replicas: has };
}

/**
 * Gives a missing stream the replicas its siblings have when AGENTS_REPLICAS asks for fewer: an
 * agentctl run from a shell with the default (1) would create a bucket new to this build with one
 * copy where every other store keeps three.
 */
async function creatingReplicas(
  wanted: WantedStream,
  { clustered, notes, siblingReplicas }: Where,
): Promise<WantedStream> {
  if (!clustered || wanted.num_replicas === undefined) return wanted;
  const most = await siblingReplicas();
  if (most <= wanted.num_replicas) return wanted;
  notes.push(
    `stream ${wanted.name} was missing and AGENTS_REPLICAS is ${wanted.num_replicas}: created with ${most} replicas, as the other streams and buckets have`,
  );
  return { ...wanted, num_replicas: most };
}

/** nats-server's answer when its cluster has too few servers up for a stream's replicas. */
const NO_SUITABLE_PEERS = 10005;

/**
 * A stream whose copies the JetStream cluster could not place: the server's words ("no suitable
 * peers for placement", INTERNAL) named neither AGENTS_REPLICAS nor the servers missing.
 * Retryable: servers down at start-up come back; an AGENTS_REPLICAS above the cluster's size does not.
 */
function unplaceable(name: string, replicas: number | undefined, err: unknown): AgentError | undefined {
  if (!(err instanceof JetStreamApiError) || err.code !== NO_SUITABLE_PEERS) return undefined;
  return new AgentError(
    "BUS_UNAVAILABLE",
    `the JetStream cluster cannot place ${replicas ?? "its"} copies of stream ${name} (${err.message}): fewer than ${replicas ?? "that many"} of its servers are up, or AGENTS_REPLICAS is above the number of servers in the cluster`,
    { cause: err },
  );
}

/** Creates a missing stream (or bucket), or updates what differs, then reads its configuration back. */
async function converge(
  jsm: JetStreamManager,
  asked: WantedStream,
  where: Where,
  create: (wanted: WantedStream) => Promise<unknown>,
): Promise<ProvisionAction> {
  const name = asked.name;
  const existing = await streamInfoIfAny(jsm, name);
  const wanted = existing
    ? keepingReplicas(asked, existing.config, where)
    : await creatingReplicas(asked, where);
  let action: ProvisionAction = "unchanged";
  try {
    if (!existing) {
      await create(wanted);
      action = "created";
    } else if (differences(wanted, existing.config).length > 0) {
      await jsm.streams.update(name, { ...existing.config, ...wanted });
      action = "updated";
    }
  } catch (err) {
    throw unplaceable(name, wanted.num_replicas, err) ?? err;
  }
  const diff = differences(wanted, (await jsm.streams.info(name)).config);
  if (diff.length > 0) {
    throw new AgentError("INTERNAL", `stream ${name} did not take its configuration (${diff.join("; ")})`);
  }
  return action;
}

/**
 * Sets how long the run log keeps a message (`max_age`; 0 keeps every one for ever), when it
 * differs; returns whether it changed. The supervisor's alone (SUPERVISOR_LOG_MAX_AGE_MS): other
 * actors provision without it, and so leave what the stream has.
 */
export async function setLogMaxAge(
  nc: NatsConnection,
  subjects: Subjects,
  maxAgeMs: number,
): Promise<boolean> {
  const jsm = await jetstreamManager(nc);
  const name = subjects.streams().log;
  const wanted = maxAgeMs * NANOS_PER_MS;
  const { config } = await jsm.streams.info(name);
  if (config.max_age === wanted) return false;
  const updated = await jsm.streams.update(name, { ...config, max_age: wanted });
  if (updated.config.max_age !== wanted) {
    throw new AgentError(
      "INTERNAL",
      `stream ${name} did not take max_age ${wanted} (has ${updated.config.max_age})`,
    );
  }
  return true;
}

/**
 * Creates or converges the streams and KV buckets of DESIGN.md §3. Safe to run from every actor
 * at every start: it only changes what differs, then reads the configuration back.
 */
export async function provision(nc: NatsConnection, options: ProvisionOptions): Promise<ProvisionReport> {
  requireSupportedServer(nc);
  const version = nc.info?.version ?? "unknown";
  const clustered = nc.info?.cluster !== undefined;
  if (options.replicas > 1 && !clustered) {
    // A single server keeps one copy whatever a stream asks for: say so rather than pretend.
    throw new AgentError(
      "INVALID_INPUT",
      `invalid configuration: AGENTS_REPLICAS is ${options.replicas} and the NATS server at ${nc.getServer()} is not in a cluster, so it keeps one copy of every stream and bucket: set AGENTS_REPLICAS=1, or connect to a JetStream cluster of at least ${options.replicas} servers`,
    );
  }
  const notes: string[] = [];
  const jsm = await jetstreamManager(nc);
  let siblings: Promise<number> | undefined;
  // Read only when a store is missing, once: the others' replicas as they were before this start.
  const siblingReplicas = (): Promise<number> =>
    (siblings ??= Promise.all(
      options.subjects
        .storeStreams()
        .map(async (name) => (await streamInfoIfAny(jsm, name))?.config.num_replicas ?? 0),
    ).then((replicas) => Math.max(0, ...replicas)));
  const where: Where = { clustered, notes, siblingReplicas };
  const streams: Record<string, ProvisionAction> = {};
  for (const config of streamConfigs(options.subjects, options.replicas)) {
    streams[config.name] = await converge(jsm, config, where, (wanted) => jsm.streams.add(wanted));
  }
  const kvm = new Kvm(nc);
  const buckets: Record<string, ProvisionAction> = {};
  const redactedInputs = options.subjects.buckets().redactedInputs;
  for (const bucket of options.subjects.bucketList()) {
    // A bucket is a stream underneath: its replicas are raised like the streams' (a cluster moved
    // to R3 kept its idempotency records, pool and tree caps on one server), never lowered. An
    // actor without the right to create or update streams (every one but the supervisor under
    // nats.conf) changes nothing once the supervisor has provisioned with the same replicas.
    buckets[bucket] = await converge(
      jsm,
      { name: bucketStream(bucket), num_replicas: options.replicas },
      where,
      (wanted) =>
        kvm.create(bucket, {
          replicas: wanted.num_replicas,
          history: 1,
          // Kept no longer than a call may wait (an approval); an operator may change it on the
          // bucket, which provisioning leaves as it is.
          ...(bucket === redactedInputs ? { ttl: REDACTED_INPUTS_MAX_AGE_MS } : {}),
        }),
    );
  }
  return { serverVersion: version, streams, buckets, notes };
}
