/**
 * W2 kills a worker in the middle of loops that all started together, when no job is being taken.
 * In production jobs keep arriving: this kills one of two workers while C = 100 loops run closed
 * (each loop, as it commits, is followed by a new one), keeps new loops coming for a second after
 * the kill, and reports per trial how long the loops in flight at the kill took to finish. A job
 * the dead worker had named (in a beat, or announced as it took it) is handed back within about a
 * second; one it never named waits out the ack wait (30 s, the default). For each job that waited,
 * the trial says whether the dead worker had named it: watched on the wire, its ack subject's stream
 * sequence against those of the dead worker's beats and announcements. Since the survivor looks for
 * jobs nobody named (StraySweep), the trial also counts those it found and handed back.
 * `node bench/micro/kill-during-intake.ts [trials] [workers]` after `npm run build` (each trial 5–35 s;
 * two workers by default, one of them killed).
 */
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { streamSeqOf } from "../../dist/services/agent/strays.js";
import { decode } from "../../dist/shared/bus/codec.js";
import { WorkerBeat } from "../../dist/shared/contracts/cluster.js";
import { median } from "../lib/stats.ts";
import { OurCluster, OUR_BENCH_ENV } from "../systems/ours.ts";

const TRIALS = Number(process.argv[2] ?? 6);
const WORKERS = Number(process.argv[3] ?? 2);
const LOOPS = 100;
const VICTIM = "agent-1";
/** Longer than a hand-back takes (about a second), far shorter than the ack wait. */
const STRANDED_MS = 10_000;

/** `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>` */
const ackField = (subject: string, i: number): string => subject.split(".")[i] ?? "";
const decoder = new TextDecoder();

const nats = await startLocalNats({});
const lines: string[] = [];
for (let trial = 1; trial <= TRIALS; trial += 1) {
  const cluster = await OurCluster.start(nats.url, OUR_BENCH_ENV, WORKERS);
  const { nc, subjects } = cluster.bus;
  let killedAt: number | undefined;
  const named = new Set<number | undefined>();
  const handedBack = new Set<number | undefined>();
  /** Handed back by a survivor's search for jobs nobody named: its NAKs carry no delivery time. */
  const strays = new Set<number | undefined>();
  const waited = new Set<number | undefined>();
  const noteNamed = (data: Uint8Array): void => {
    const beat = decode(WorkerBeat, data);
    if (beat.workerId === VICTIM) for (const job of beat.jobs) named.add(streamSeqOf(job));
  };
  const subs = [
    nc.subscribe(subjects.workerBeatAll(), { callback: (_err, msg) => noteNamed(msg.data) }),
    nc.subscribe(subjects.workerTookAll(), { callback: (_err, msg) => noteNamed(msg.data) }),
    // Every ack and NAK of a job, by whoever sends it: a job delivered a second time without a
    // NAK waited out its ack wait.
    nc.subscribe(`$JS.ACK.${subjects.streams().runs}.>`, {
      callback: (_err, msg) => {
        if (killedAt === undefined) return;
        const seq = streamSeqOf(msg.subject);
        if (decoder.decode(msg.data).startsWith("-NAK")) {
          handedBack.add(seq);
          if (ackField(msg.subject, 7) === "0") strays.add(seq);
        } else if (Number(ackField(msg.subject, 4)) >= 2 && !handedBack.has(seq)) waited.add(seq);
      },
    }),
  ];
  const finished: number[] = [];
  let arriving = true;
  const loop = async (): Promise<void> => {
    while (arriving) {
      const before = killedAt === undefined;
      await cluster.runLoop();
      if (before && killedAt !== undefined) finished.push(performance.now() - killedAt);
    }
  };
  const loops = Array.from({ length: LOOPS }, loop);
  await new Promise((resolve) => setTimeout(resolve, 2_500 + 250 * (trial % 4)));
  cluster.cluster.signal(VICTIM, "SIGKILL");
  killedAt = performance.now();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  arriving = false;
  await Promise.all(loops);
  for (const sub of subs) sub.unsubscribe();
  await cluster.stop();
  const stranded = finished.filter((ms) => ms > STRANDED_MS).length;
  const wasNamed = [...waited].filter((seq) => named.has(seq)).length;
  const line =
    `trial ${trial}: ${finished.length} loops in flight at the kill, finished after it in ` +
    `${Math.round(median(finished))} ms (median), ${Math.round(Math.max(...finished))} ms (max); ` +
    `${stranded} took over ${STRANDED_MS / 1000} s; jobs handed back ${handedBack.size} ` +
    `(found unnamed: ${strays.size}), ` +
    `waited out the ack wait ${waited.size} (named by the dead worker: ${wasNamed})`;
  console.log(line);
  lines.push(line);
}
await nats.stop();
const hit = lines.filter((l) => !/ 0 took over/.test(l)).length;
console.log(`\n${hit} of ${TRIALS} trials left loops to the ack wait`);
