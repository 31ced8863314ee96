import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { SubmitReply } from "../../shared/contracts/control.js";
import { decode, encode } from "../../shared/bus/codec.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { bucketStream } from "../../shared/bus/subjects.js";
import { SubmitRequest } from "../../shared/contracts/cluster.js";
import { callSupervisorRoll } from "../../shared/bus/supervisor-roll.js";
import { supervisorProblems } from "../../services/cli/cluster-health.js";
import { useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

const CAPACITY = 5;
const suite = useClusterSuite("adm", {
  // No workers: admitted runs stay queued and keep their slots, so capacity is really contended.
  actors: [
    { kind: "supervisor", name: "supervisor-1" },
    { kind: "supervisor", name: "supervisor-2" },
  ],
  env: { SUPERVISOR_POOL_CAPACITY: String(CAPACITY) },
});

describe("admission across supervisor replicas", () => {
  it("two supervisors, 50 concurrent submits, capacity 5: never more than 5 active", async () => {
    const { nc, subjects } = suite.bus;
    const pool = PoolLedger.of(suite.bus);
    const samples: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        samples.push((await pool.active()).length);
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    const replies = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const msg = await nc.request(
          subjects.runsSubmit(),
          encode(SubmitRequest, { ...spec(), runId: `adm-${i}` }),
          {
            timeout: 15_000,
          },
        );
        return decode(SubmitReply, msg.data);
      }),
    );
    sampling = false;
    await sampler;
    const admitted = replies.filter((r) => r.ok);
    const refused = replies.flatMap((r) => (r.ok ? [] : [r.error.code]));
    expect(admitted).toHaveLength(CAPACITY);
    expect(refused).toEqual(Array.from({ length: 50 - CAPACITY }, () => "POOL_FULL"));
    expect(samples.length).toBeGreaterThan(0);
    expect(Math.max(...samples)).toBeLessThanOrEqual(CAPACITY);
    expect(await pool.active()).toHaveLength(CAPACITY);
    // Both replicas served (a queue group spreads 50 requests; all on one has odds of 2^-49).
    for (const name of ["supervisor-1", "supervisor-2"])
      expect(await suite.log(name)).toMatch(/run (admitted|rejected)/);
    const refusedId = `adm-${replies.findIndex((r) => !r.ok)}`;
    const [rejection, ...more] = await suite.audit(refusedId);
    expect(more).toEqual([]);
    expect(rejection).toMatchObject({
      kind: "run.rejected",
      seq: 1,
      actor: "supervisor",
      data: { code: "POOL_FULL" },
    });
  }, 60_000);

  it("only a run named by its submitter is looked up in the runs bucket: an id the supervisor makes is new", async () => {
    const { nc, subjects } = suite.bus;
    const runs = subjects.buckets().runs;
    const lookups: string[] = [];
    const sub = nc.subscribe(`$JS.API.STREAM.MSG.GET.${bucketStream(runs)}`, {
      callback: (_err, msg) => void lookups.push(new TextDecoder().decode(msg.data)),
    });
    await nc.flush();
    const submit = async (request: z.input<typeof SubmitRequest>): Promise<SubmitReply> =>
      decode(
        SubmitReply,
        (await nc.request(subjects.runsSubmit(), encode(SubmitRequest, request), { timeout: 15_000 })).data,
      );
    const unnamed = await submit(spec());
    const named = await submit({ ...spec(), runId: "adm-named" });
    await nc.flush();
    sub.unsubscribe();
    // The pool is full from the test before: both are refused, after the lookup a named run needs.
    expect([unnamed.ok, named.ok]).toEqual([false, false]);
    expect(lookups.filter((l) => l.includes(`$KV.${runs}.adm-named"`))).toHaveLength(1);
    // Generated ids start with "run-"; the runs of the test before (adm-…) may be read by the stall scan.
    expect(lookups.filter((l) => l.includes(`$KV.${runs}.run-`))).toEqual([]);
  }, 30_000);

  it("every replica answers the roll call, and one started with another pool capacity is named", async () => {
    const { nc, subjects } = suite.bus;
    const both = await callSupervisorRoll(nc, subjects, 1_500);
    expect(both.supervisors.map((s) => s.poolCapacity)).toEqual([CAPACITY, CAPACITY]);
    expect(new Set(both.supervisors.map((s) => s.instance)).size).toBe(2);
    expect(supervisorProblems(both)).toEqual([]);
    await suite.cluster.start("supervisor", "supervisor-3", { SUPERVISOR_POOL_CAPACITY: "7" });
    const three = await callSupervisorRoll(nc, subjects, 1_500);
    expect(three.supervisors).toHaveLength(3);
    expect(supervisorProblems(three)).toEqual([
      expect.stringMatching(
        /^the supervisors disagree on SUPERVISOR_POOL_CAPACITY: 5 \(.+, .+\), 7 \([^,]+\);/,
      ),
    ]);
    suite.cluster.signal("supervisor-3", "SIGKILL");
  }, 30_000);
});
