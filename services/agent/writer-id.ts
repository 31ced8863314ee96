/**
 * A lease's WAL writer id: `<workerId>-<lease>-<suffix>.j<jobSeq>`. Unique per lease (see
 * LeaseDeps.writerId), and naming the job message the run was driven with (its stream sequence
 * on the work queue), so that a worker handed another copy of the run's job can tell from the
 * WAL's last message whether the copy that drives the run is still held by a live worker.
 */
export function leaseWriterId(workerId: string, lease: number, suffix: string, jobSeq: number): string {
  return `${workerId}-${lease}-${suffix}.j${jobSeq}`;
}

/** The job's stream sequence a writer id names; undefined for an older build's writer ids. */
export function jobOfWriter(writerId: string | undefined): number | undefined {
  const match = /\.j(\d+)$/.exec(writerId ?? "");
  const seq = match ? Number(match[1]) : NaN;
  return Number.isSafeInteger(seq) && seq > 0 ? seq : undefined;
}

/**
 * The job message that drives a run while this job, a second copy of the run's job, was handed to
 * a worker: the WAL's last writer was driving it with that message, which a live worker still
 * holds; undefined when this job should take the run. The supervisor re-queues a run whose status
 * has not moved for SUPERVISOR_STALL_MS, which a long step (a slow model, a long tool) does too;
 * taking the run over would fence its worker and call the model again, and with a step longer than
 * the ack wait the two copies took the run from each other for ever, each restarting the step.
 * Only a job that carries nothing (no spec, no outside event) is dropped: the other copy stays
 * queued until its run is done, so the run keeps a job if that worker dies. A job the run was last
 * driven with, this one, is a takeover.
 */
export function anotherCopyDrives(
  job: { spec?: unknown; event?: unknown },
  lastWriter: string | undefined,
  jobSeq: number,
  jobHeld: (jobSeq: number) => boolean,
): number | undefined {
  if (job.spec || job.event) return undefined;
  const drivenWith = jobOfWriter(lastWriter);
  return drivenWith === undefined || drivenWith === jobSeq || !jobHeld(drivenWith) ? undefined : drivenWith;
}
