import { describe, expect, it } from "vitest";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import { PeerTable } from "../../services/agent/peers.js";

const DEAD_AFTER = 1_000;

function beat(instance: string, jobs: string[] = [], leaving?: boolean): WorkerBeat {
  return WorkerBeat.parse({
    schemaVersion: 1,
    workerId: `w-${instance}`,
    instance,
    deadAfterMs: DEAD_AFTER,
    jobs,
    ...(leaving ? { leaving } : {}),
  });
}

const job = (n: number): string => `$JS.ACK.AGENT_RUNS.agent-workers.1.${n}.${n}.0.0`;
const names = (peers: { instance: string }[]): string[] => peers.map((p) => p.instance).sort();

describe("worker presence: who hands back a silent worker's jobs", () => {
  it("a peer silent past the time it announced is gone once, with the jobs of its last beat; a beating one is not", () => {
    const table = new PeerTable("a");
    table.heard(beat("b", [job(1)]), 0);
    table.heard(beat("b", [job(1), job(2)]), 250);
    table.heard(beat("c", [job(3)]), 250);
    table.heard(beat("c", [job(3)]), 1_200);
    expect(table.expire(1_250)).toEqual([]);
    const gone = table.expire(1_251);
    expect(names(gone)).toEqual(["b"]);
    expect(gone[0]?.jobs).toEqual([job(1), job(2)]);
    expect(table.expire(5_000).map((p) => p.instance)).toEqual(["c"]);
    expect(table.expire(9_000)).toEqual([]);
    expect(table.live).toBe(0);
  });

  it("of several survivors only the one whose name sorts first hands the jobs back", () => {
    const first = new PeerTable("a");
    const second = new PeerTable("c");
    for (const table of [first, second]) {
      table.heard(beat("b", [job(1)]), 0);
      for (const self of ["a", "c"]) table.heard(beat(self), 1_500);
    }
    expect(names(first.expire(1_600))).toEqual(["b"]);
    expect(second.expire(1_600)).toEqual([]);
  });

  it("a newcomer leads (looks for jobs nobody holds) only while it sorts first among the live workers it heard", () => {
    const table = new PeerTable("b");
    expect(table.leads()).toBe(true);
    table.heard(beat("c"), 0);
    expect(table.leads()).toBe(true);
    table.heard(beat("a"), 0);
    expect(table.leads()).toBe(false);
    table.heard(beat("a", [], true), 100);
    expect(table.leads()).toBe(true);
    table.heard(beat("a"), 200);
    table.heard(beat("c"), 1_500);
    expect(names(table.expire(1_300))).toEqual(["a"]);
    expect(table.leads()).toBe(true);
  });

  it("a worker that leaves (drained, its jobs handed back) and its own beats are never reaped", () => {
    const table = new PeerTable("a");
    table.heard(beat("a", [job(9)]), 0);
    table.heard(beat("b", [job(1)]), 0);
    table.heard(beat("b", [], true), 100);
    expect(table.live).toBe(0);
    expect(table.expire(10_000)).toEqual([]);
  });

  it("peers gone in the same round: the first-sorting survivor among those left hands all of them back", () => {
    const table = new PeerTable("c");
    table.heard(beat("a", [job(1)]), 0);
    table.heard(beat("b", [job(2)]), 0);
    expect(names(table.expire(1_001))).toEqual(["a", "b"]);
  });

  it("when the designated survivor fell silent before the gone peer's deadline, the next survivor hands both back", () => {
    const table = new PeerTable("c");
    table.heard(beat("b", [job(1)]), 0);
    table.heard(beat("a", [job(2)]), 500);
    // b is gone at 1 001 and a (alive as far as c knows) is to hand it back…
    expect(table.expire(1_001)).toEqual([]);
    // …but a's last beat came before b's deadline: a never saw b go.
    expect(names(table.expire(1_501))).toEqual(["a", "b"]);
  });

  it("when the designated survivor outlived the gone peer's deadline, it handed the jobs back: nobody does it twice", () => {
    const table = new PeerTable("c");
    table.heard(beat("b", [job(1)]), 0);
    table.heard(beat("a", [job(2)]), 1_200);
    expect(table.expire(1_100)).toEqual([]);
    expect(names(table.expire(2_201))).toEqual(["a"]);
    expect(table.expire(60_000)).toEqual([]);
  });

  it("a suspect found still connected is watched again, its silence counted from the check; a beat meanwhile wins", () => {
    const table = new PeerTable("a");
    table.heard(beat("b", [job(1)]), 0);
    const [suspect] = table.expire(1_001);
    expect(suspect?.instance).toBe("b");
    table.stillThere(suspect!, 1_500);
    expect(table.live).toBe(1);
    expect(table.expire(2_500)).toEqual([]);
    expect(table.expire(2_501).map((p) => p.jobs)).toEqual([[job(1)]]);
    table.heard(beat("b", [job(2)]), 3_000);
    table.stillThere(suspect!, 3_100);
    expect(table.expire(4_001).map((p) => p.jobs)).toEqual([[job(2)]]);
  });

  it("silence this instance could not hear (its connection was down) is excused: nobody is reaped for it", () => {
    const table = new PeerTable("a");
    table.heard(beat("b", [job(1)]), 0);
    table.excuse(3_000);
    expect(table.expire(3_500)).toEqual([]);
    expect(names(table.expire(4_001))).toEqual(["b"]);
  });

  it("a job announced between beats is added to the last beat's, once; the next beat names them all again", () => {
    const table = new PeerTable("a");
    table.heard(beat("b", [job(1)]), 0);
    table.took(beat("b", [job(2)]), 100);
    table.took(beat("b", [job(2), job(3)]), 200);
    table.took(beat("a", [job(9)]), 200);
    // The announcement is a sign of life too: silence counts from it.
    expect(table.expire(1_100)).toEqual([]);
    const gone = table.expire(1_201);
    expect(names(gone)).toEqual(["b"]);
    expect(gone[0]?.jobs).toEqual([job(1), job(2), job(3)]);

    table.heard(beat("c", [job(4), job(5)]), 2_000);
    table.took(beat("c", [job(6)]), 2_010);
    // Job 4 finished meanwhile: the beat replaces what the announcements added.
    table.heard(beat("c", [job(5), job(6)]), 2_020);
    expect(table.expire(3_021)[0]?.jobs).toEqual([job(5), job(6)]);
  });

  it("an announcement from a peer not heard of yet makes it known, with that job; one of a leaving peer is ignored", () => {
    const table = new PeerTable("a");
    table.took(beat("d", [job(7)]), 0);
    table.took(beat("e", [job(8)], true), 0);
    expect(table.live).toBe(1);
    expect(table.expire(1_001).map((p) => [p.instance, p.jobs])).toEqual([["d", [job(7)]]]);
  });

  it("a beat is a contract: jobs must be ack subjects, the instance a subject token", () => {
    expect(WorkerBeat.safeParse({ ...beat("a"), jobs: ["agents.wal.r1"] }).success).toBe(false);
    expect(WorkerBeat.safeParse({ ...beat("a"), instance: "a.b" }).success).toBe(false);
    expect(WorkerBeat.safeParse({ ...beat("a"), deadAfterMs: 0 }).success).toBe(false);
  });
});
