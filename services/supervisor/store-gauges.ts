import { jetstreamManager } from "@nats-io/jetstream";
import { Gauge, type Registry } from "prom-client";
import type { ActorBus } from "../../shared/bus/actor.js";
import { currentCopies, readClusterState, type ClusterState } from "../../shared/bus/cluster-state.js";

/** A scrape waits at most this long for JetStream: a silent one leaves the gauges empty instead. */
export const STORE_READ_TIMEOUT_MS = 2_000;

/**
 * The supervisor's view of the streams and buckets, read by JetStream at each scrape of
 * `/metrics`: what `agentctl cluster` prints, as gauges to alert on (a copy down, a store with
 * fewer replicas than the others, storage near the account's limit, jobs piling up). A read that
 * fails (JetStream silent) leaves them without values for that scrape; `agents_jetstream_answering`
 * says why.
 */
export async function registerStoreGauges(bus: ActorBus, registry: Registry): Promise<void> {
  const jsm = await jetstreamManager(bus.nc, { timeout: STORE_READ_TIMEOUT_MS, checkAPI: false });
  // Each gauge's collect() is called on its own at a scrape: they share one read a second.
  let last: { at: number; state: Promise<ClusterState | undefined> } | undefined;
  const state = (): Promise<ClusterState | undefined> => {
    const now = bus.clock.now();
    if (!last || now - last.at >= 1_000) {
      const read = readClusterState({ nc: bus.nc, jsm, subjects: bus.subjects }).catch(() => undefined);
      last = { at: now, state: read };
    }
    return last.state;
  };
  const registers = [registry];
  new Gauge({
    name: "agents_store_replicas",
    help: "Replicas a stream or bucket (its stream, KV_<bucket>) is configured with",
    labelNames: ["store"],
    registers,
    async collect() {
      this.reset();
      for (const store of (await state())?.stores ?? [])
        if (store.replicas !== undefined) this.set({ store: store.name }, store.replicas);
    },
  });
  new Gauge({
    name: "agents_store_copies_current",
    help: "Copies of a stream or bucket that are current: its leader and the followers caught up with it (alert when below agents_store_replicas)",
    labelNames: ["store"],
    registers,
    async collect() {
      this.reset();
      const now = await state();
      const clustered = now?.server.cluster !== undefined;
      for (const store of now?.stores ?? [])
        if (store.replicas !== undefined) this.set({ store: store.name }, currentCopies(store, clustered));
    },
  });
  new Gauge({
    name: "agents_jetstream_storage_bytes",
    help: "JetStream file storage the account uses",
    registers,
    async collect() {
      this.reset();
      const now = await state();
      if (now) this.set(now.storage.used);
    },
  });
  new Gauge({
    name: "agents_jetstream_storage_limit_bytes",
    help: "The account's JetStream storage limit (absent when it has none): writes are refused as STORAGE_FULL at it",
    registers,
    async collect() {
      this.reset();
      const limit = (await state())?.storage.limit;
      if (limit !== undefined) this.set(limit);
    },
  });
  new Gauge({
    name: "agents_jobs_waiting",
    help: "Jobs on the work queue no worker holds yet",
    registers,
    async collect() {
      this.reset();
      const jobs = (await state())?.jobs;
      if (jobs) this.set(jobs.waiting);
    },
  });
}
