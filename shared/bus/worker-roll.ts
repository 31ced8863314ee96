import type { NatsConnection } from "@nats-io/transport-node";
import { WorkerBeat } from "../contracts/cluster.js";
import type { Clock } from "../runtime/clock.js";
import { decode } from "./codec.js";
import type { Subjects } from "./subjects.js";

/** One agent worker as its last beat described it. */
export interface WorkerHeard {
  workerId: string;
  instance: string;
  /** Jobs it held then. */
  jobs: number;
  /** It said it is draining: its jobs are handed back, it takes no more. */
  leaving: boolean;
  /** The convergence policies it registers besides the built-in ones (absent: none). */
  policies?: string[];
}

/** The agent workers heard beating within `listenedMs`, by worker id. */
export interface WorkerRoll {
  listenedMs: number;
  workers: WorkerHeard[];
  /** Why none could be heard: the server refused the subscription (the NATS user's permissions). */
  refused?: string;
}

/**
 * Listens to the workers' beats (every AGENT_BEAT_MS, 500 ms by default) for `listenMs`: every
 * live worker is heard in that time unless its beats are further apart. Nothing is asked of the
 * workers; a beat that cannot be read is left out.
 */
export async function listenForWorkers(
  nc: NatsConnection,
  subjects: Subjects,
  listenMs: number,
  clock: Pick<Clock, "sleep">,
): Promise<WorkerRoll> {
  const heard = new Map<string, WorkerHeard>();
  const sub = nc.subscribe(subjects.workerBeatAll(), {
    callback: (err, msg) => {
      if (err) return;
      try {
        const beat = decode(WorkerBeat, msg.data);
        heard.set(beat.instance, {
          workerId: beat.workerId,
          instance: beat.instance,
          jobs: beat.jobs.length,
          leaving: beat.leaving === true,
          ...(beat.policies?.length ? { policies: beat.policies } : {}),
        });
      } catch {
        // Not a beat this build reads: not a worker it can report.
      }
    },
  });
  const ended = await Promise.race([sub.closed, clock.sleep(listenMs).then(() => "listened" as const)]);
  sub.unsubscribe();
  const workers = [...heard.values()].sort(
    (a, b) => a.workerId.localeCompare(b.workerId) || a.instance.localeCompare(b.instance),
  );
  if (ended instanceof Error) {
    const refused = `the NATS server refused a subscription to '${subjects.workerBeatAll()}': ${ended.message}`;
    return { listenedMs: listenMs, workers, refused };
  }
  return { listenedMs: listenMs, workers };
}
