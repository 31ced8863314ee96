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
