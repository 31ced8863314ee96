import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { RunJob } from "../../shared/contracts/cluster.js";

/** The jobs of the run on the work queue, oldest first (for suites where nobody consumes them). */
export async function queuedJobs(bus: ActorBus, runId: string): Promise<RunJob[]> {
  const stream = bus.subjects.streams().runs;
  const subject = bus.subjects.runQueue(runId);
  const { state } = await bus.jsm.streams.info(stream);
  const jobs: RunJob[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq; seq++) {
    const msg = await bus.jsm.streams.getMessage(stream, { seq }).catch(() => null);
    if (msg?.subject === subject) jobs.push(decode(RunJob, msg.data));
  }
  return jobs;
}
