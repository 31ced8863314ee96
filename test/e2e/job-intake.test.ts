import { describe, expect, it } from "vitest";
import { WORKER_CONSUMER } from "../../shared/bus/jobs.js";
import { settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

const suite = useClusterSuite("intake", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
});

describe("job intake", () => {
  it("a worker with room takes queued jobs several per pull: 12 runs submitted at once come in fewer pulls than jobs, and all commit", async () => {
    const subject = `$JS.API.CONSUMER.MSG.NEXT.${suite.bus.subjects.streams().runs}.${WORKER_CONSUMER}`;
    const pulls = suite.bus.nc.subscribe(subject);
    let count = 0;
    const counting = (async () => {
      for await (const _ of pulls) count += 1;
    })();
    await suite.bus.nc.flush();
    const replies = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        suite.client.submit(spec({ script: [{ text: `batch ${i}` }], tools: [] })),
      ),
    );
    const statuses = await Promise.all(replies.map((r) => suite.waitFor(r.runId, settled)));
    pulls.unsubscribe();
    await counting;
    expect(statuses.map((s) => s.status)).toEqual(replies.map(() => "committed"));
    // One job per pull makes a new pull for every job taken (12). In batches the two workers'
    // open pulls take up to 8 each: a new one only when one fills or expires (after a second).
    expect(count).toBeLessThan(12);
  }, 60_000);
});
