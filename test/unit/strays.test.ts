import { describe, expect, it } from "vitest";
import { PeerTable } from "../../services/agent/peers.js";
import {
  heardTwiceSince,
  strayAckSubject,
  strays,
  streamSeqOf,
  walkParts,
} from "../../services/agent/strays.js";
import { WorkerBeat } from "../../shared/contracts/cluster.js";

describe("stranded jobs: what a survivor hands back besides the jobs a gone worker named", () => {
  it("reads the stream sequence of an ack subject, and writes one the server takes for that job", () => {
    expect(streamSeqOf("$JS.ACK.AGENT_RUNS.agent-workers.3.41.97.1795628195441000000.12")).toBe(41);
    expect(streamSeqOf("$JS.ACK.hub.AbC123.AGENT_RUNS.agent-workers.3.41.97.1795628195441000000.12.x7")).toBe(
      41,
    );
    // Not an ack subject, or not one of nats-server's: nothing to hand back.
    for (const subject of [
      "agents.workers.beat.x",
      "$JS.ACK.AGENT_RUNS.agent-workers.3",
      "$JS.ACK.AGENT_RUNS.agent-workers.3.41.97.0.0.extra",
      "$JS.NAK.AGENT_RUNS.agent-workers.3.41.97.0.0",
      "$JS.ACK.AGENT_RUNS.agent-workers.3.0.97.0.0",
      "$JS.ACK.AGENT_RUNS.agent-workers.3.x.97.0.0",
    ])
      expect(streamSeqOf(subject)).toBeUndefined();
    const made = strayAckSubject("AGENT_RUNS", "agent-workers", 41, 120);
    expect(made).toBe("$JS.ACK.AGENT_RUNS.agent-workers.1.41.120.0.0");
    expect(streamSeqOf(made)).toBe(41);
  });

  it("a job is stranded only if neither look found it named: one named in either look is held", () => {
    expect(strays(new Set([9, 4, 7]), new Set([7, 4, 12]))).toEqual([4, 7]);
    expect(strays(new Set([4]), new Set())).toEqual([]);
    expect(strays(new Set(), new Set([4]))).toEqual([]);
  });

  it("a look reads its range in parts side by side: each sequence in exactly one part, a short range in one", () => {
    expect(walkParts(5, 4)).toEqual([]);
    expect(walkParts(1, 10)).toEqual([[1, 10]]);
    expect(walkParts(1, 200, 8, 64)).toEqual([
      [1, 64],
      [65, 128],
      [129, 192],
      [193, 200],
    ]);
    for (const [first, last] of [
      [1, 1_000],
      [17, 10_016],
      [3, 70],
    ] as const) {
      const parts = walkParts(first, last);
      expect(parts.length).toBeLessThanOrEqual(8);
      const covered = parts.flatMap(([from, to]) =>
        Array.from({ length: to - from + 1 }, (_, i) => from + i),
      );
      expect(covered).toEqual(Array.from({ length: last - first + 1 }, (_, i) => first + i));
    }
  });

  it("the second look waits until every live worker has been heard from twice since the first", () => {
    const heard = (counts: Record<string, number>): Map<string, number> => new Map(Object.entries(counts));
    const before = heard({ b: 4, c: 9 });
    expect(heardTwiceSince(before, heard({ b: 6, c: 11 }))).toBe(true);
    // Once is not enough: a beat can leave on a timer before a job already received is read.
    expect(heardTwiceSince(before, heard({ b: 6, c: 10 }))).toBe(false);
    // A worker first heard since the first look counts its messages from none.
    expect(heardTwiceSince(before, heard({ b: 6, c: 11, d: 1 }))).toBe(false);
    expect(heardTwiceSince(before, heard({ b: 6, c: 11, d: 2 }))).toBe(true);
    // One gone (or being asked whether it is there) is not waited for: its jobs are named otherwise.
    expect(heardTwiceSince(before, heard({ c: 11 }))).toBe(true);
    expect(heardTwiceSince(before, heard({}))).toBe(true);
  });

  it("the peer table names every live peer's jobs, announcements included, and none of a gone or leaving one", () => {
    const beat = (instance: string, jobs: string[], leaving?: boolean): WorkerBeat =>
      WorkerBeat.parse({
        schemaVersion: 1,
        workerId: `w-${instance}`,
        instance,
        deadAfterMs: 1_000,
        jobs,
        ...(leaving ? { leaving } : {}),
      });
    const job = (n: number): string => strayAckSubject("AGENT_RUNS", "agent-workers", n, n);
    const table = new PeerTable("a");
    table.heard(beat("b", [job(1)]), 0);
    table.took(beat("b", [job(2)]), 10);
    table.heard(beat("c", [job(3)]), 900);
    table.heard(beat("d", [job(4)]), 0);
    table.heard(beat("d", [], true), 20);
    expect(table.named().sort()).toEqual([job(1), job(2), job(3)].sort());
    // Beats and announcements alike count: each is a turn of the peer's event loop.
    expect(table.heardCounts()).toEqual(
      new Map([
        ["b", 2],
        ["c", 1],
      ]),
    );
    table.expire(1_500);
    expect(table.named()).toEqual([job(3)]);
  });
});
