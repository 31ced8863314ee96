import { jetstream, type JsMsg } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { StraySweep, streamSeqOf } from "../../services/agent/strays.js";
import { ensureWorkerConsumer } from "../../shared/bus/jobs.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { ackSubject } from "../helpers/fake-worker.js";

const suite = useBusSuite("strays");
const encoder = new TextEncoder();
const decoder = new TextDecoder();

let shared: Promise<string> | undefined;
/** The shared job consumer, created once for the suite. */
function consumer(): Promise<string> {
  shared ??= ensureWorkerConsumer(suite.jsm, suite.subjects, { ackWaitMs: 60_000 });
  return shared;
}

/** Queues one job per run, its payload the run's name. */
async function queue(runs: readonly string[]): Promise<void> {
  for (const run of runs) await suite.js.publish(suite.subjects.runQueue(run), encoder.encode(run));
}

/**
 * A worker that dies: its pull takes `count` jobs, it acknowledges those `finish` says it finished,
 * and its connection goes. Returns the ack subjects of the jobs it held, by run.
 */
async function dyingWorker(count: number, finish: (run: string) => boolean): Promise<Map<string, string>> {
  const dying = await connect({
    servers: suite.server.url,
    ...(suite.server.user ? { user: suite.server.user, pass: suite.server.pass ?? "" } : {}),
  });
  const pulled = await jetstream(dying).consumers.get(suite.subjects.streams().runs, await consumer());
  const held = new Map<string, string>();
  for await (const msg of await pulled.fetch({ max_messages: count, expires: 1_500 })) {
    const run = decoder.decode(msg.data);
    if (finish(run)) msg.ack();
    else held.set(run, ackSubject(msg));
  }
  await dying.flush();
  await dying.close();
  return held;
}

/** One search, as a survivor runs it once `named` are the jobs live workers name; how many it handed back. */
async function search(named: readonly string[], handedBack: readonly string[] = []): Promise<number> {
  const metrics = new ActorMetrics("agent");
  const sweep = new StraySweep({
    bus: { ...suite, logger: silentLogger },
    consumer: await consumer(),
    named: () => new Set(named.map((job) => streamSeqOf(job)!)),
    heardCounts: () => new Map(),
    beatMs: 0,
    maxWaitMs: 0,
    metrics,
  });
  sweep.request(handedBack);
  await sweep.idle();
  const counter = await metrics.registry.getSingleMetric("agents_stray_jobs_handed_back_total")?.get();
  return counter?.values[0]?.value ?? 0;
}

/** What the queue offers next, up to `max`, each with its delivery count; all acknowledged. */
async function offered(max: number): Promise<[string, number][]> {
  const next = await jetstream(suite.nc).consumers.get(suite.subjects.streams().runs, await consumer());
  const out: [string, number][] = [];
  for await (const msg of await next.fetch({ max_messages: max, expires: 1_500 })) {
    out.push([decoder.decode(msg.data), msg.info.deliveryCount]);
    msg.ack();
  }
  return out;
}

/** A live worker's job ends as it would, on its own ack subject; settles once nothing is pending. */
async function finished(job: string): Promise<void> {
  suite.nc.publish(job, encoder.encode("+ACK"));
  await expect
    .poll(
      async () =>
        (await suite.jsm.consumers.info(suite.subjects.streams().runs, await consumer())).num_ack_pending,
    )
    .toBe(0);
}

describe("a survivor's search for jobs delivered to a gone worker's pull", () => {
  it("hands back, on the real work queue, the delivered job nobody names: not a named one, not an acknowledged one, not one never delivered", async () => {
    await queue(["named", "stranded", "done", "queued"]);
    const held = await dyingWorker(3, (run) => run === "done");
    expect([...held.keys()]).toEqual(["named", "stranded"]);

    // A live worker names "named" (its beat would): it stays where it is.
    expect(await search([held.get("named")!])).toBe(1);
    // The stranded job is offered again at once (the ack wait is a minute), then the queued one.
    expect(await offered(3)).toEqual([
      ["stranded", 2],
      ["queued", 1],
    ]);
    await finished(held.get("named")!);
  });

  it("a job a gone worker named, just handed back and waiting for a free worker, is not counted stranded", async () => {
    await queue(["handed-back"]);
    const pulled = await jetstream(suite.nc).consumers.get(suite.subjects.streams().runs, await consumer());
    const msg: JsMsg | null = await pulled.next({ expires: 2_000 });
    if (!msg) throw new Error("the job was not offered");
    expect(await search([], [ackSubject(msg)])).toBe(0);
    msg.ack();
  });

  it("finds stranded jobs anywhere in a long range of jobs in flight, read in parts side by side", async () => {
    const runs = Array.from({ length: 200 }, (_, i) => `many-${i}`);
    const stranded = ["many-0", "many-63", "many-64", "many-130", "many-199"];
    await queue(runs);
    const held = await dyingWorker(200, (run) => run !== "many-100" && !stranded.includes(run));
    expect(held.size).toBe(6);
    expect(await search([held.get("many-100")!])).toBe(5);
    expect(await offered(10)).toEqual(stranded.map((run) => [run, 2]));
    await finished(held.get("many-100")!);
  });
});
