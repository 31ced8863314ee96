import { describe, expect, it } from "vitest";
import { readFanOut } from "../../shared/bus/fanout.js";
import { WORKER_CONSUMER } from "../../shared/bus/jobs.js";
import { readIterations } from "../../shared/bus/tree-iterations.js";
import { FULL_CLUSTER, FULL_CLUSTER_TREE_CAP, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

/**
 * The run trees of cluster.test.ts's cluster, on a cluster of their own: the depth limit and the
 * tree's iteration cap.
 */
const suite = useClusterSuite("e2e-trees", FULL_CLUSTER);

describe("cluster: run trees on a real nats-server", () => {
  it("spawn: fan-out of 3 children returns 3 results in order while the parent holds no worker; a child past the depth limit is refused with DEPTH_LIMIT", async () => {
    const child = (text: string) => spec({ script: [{ text, delayMs: 1_500 }] });
    const reply = await suite.client.submit(
      spec({
        script: [
          {
            toolCalls: [
              { name: "spawn_agent", input: { runs: [child("one"), child("two"), child("three")] } },
            ],
          },
          { toolCalls: [{ name: "finish", input: { answer: "fanned in" } }] },
        ],
        tools: ["spawn_agent", "echo"],
        capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
      }),
    );
    // While the children run, the parent is parked: its job is acked, only the children's are held.
    // (The parent acks its job just after submitting the last child, so look for a moment.)
    await suite.waitFor(`${reply.runId}-act-1-3`, (s) => s.status === "running");
    const pending: number[] = [];
    for (let i = 0; i < 20 && pending.at(-1) !== 3; i++) {
      const info = await suite.bus.jsm.consumers.info(suite.bus.subjects.streams().runs, WORKER_CONSUMER);
      pending.push(info.num_ack_pending);
      if (info.num_ack_pending !== 3) await new Promise((r) => setTimeout(r, 25));
    }
    expect(pending.at(-1), `jobs held: ${pending.join(", ")}`).toBe(3);
    expect((await suite.client.status.get(reply.runId))?.status).toBe("running");
    const status = await suite.waitFor(reply.runId, settled, 30_000);
    expect(status.status, JSON.stringify(status.terminal)).toBe("committed");
    expect(await suite.logs()).toMatch(
      new RegExp(`"runId":"${reply.runId}"[^\\n]*parked until the children settle`),
    );
    const wal = (await suite.wal(reply.runId)).map((r) => r.record);
    const completed = wal.find((r) => r.type === "COMPLETE");
    const output = (completed?.type === "COMPLETE" ? completed.event.output : undefined) as {
      results: { runId: string; status: string; output?: string }[];
    };
    expect(output.results.map((r) => [r.status, r.output])).toEqual([
      ["committed", "one"],
      ["committed", "two"],
      ["committed", "three"],
    ]);
    const childStatus = await suite.client.status.get(output.results[0]?.runId ?? "");
    expect(childStatus).toMatchObject({ rootRunId: reply.runId, parentRunId: reply.runId, depth: 1 });
    // The supervisor enforces the cluster's depth limit (2 here) on any child, whatever the parent claims.
    await expect(
      suite.client.submit({ ...spec(), parent: { runId: reply.runId, depth: 2 } }),
    ).rejects.toMatchObject({ code: "DEPTH_LIMIT", message: expect.stringMatching(/depth limit/) as string });
    // A run at depth 2 whose grant would allow more: its child is refused by the supervisor, and the
    // fan-in says so for that child instead of waiting for it (under a stand-in parent with no status).
    const deep = await suite.client.submit({
      ...spec({
        script: [
          { toolCalls: [{ name: "spawn_agent", input: { runs: [child("too deep")] } }] },
          { toolCalls: [{ name: "finish", input: { answer: "tried" } }] },
        ],
        tools: ["spawn_agent", "echo"],
        capabilities: [{ kind: "spawn", maxDepth: 5 }, "compute"],
      }),
      parent: { runId: `${reply.runId}-stand-in`, rootRunId: reply.runId, depth: 1 },
    });
    expect((await suite.waitFor(deep.runId, settled, 30_000)).status).toBe("committed");
    const deepWal = (await suite.wal(deep.runId)).map((r) => r.record);
    const fanIn = deepWal.find((r) => r.type === "COMPLETE");
    expect(fanIn?.type === "COMPLETE" && fanIn.event.output).toMatchObject({
      results: [
        {
          status: "failed",
          error: { code: "DEPTH_LIMIT", message: expect.stringMatching(/depth limit/) as string },
        },
      ],
    });
  }, 60_000);

  it("global iteration cap: a run tree (parent and children) never makes more model calls than the cap; the run that hits it circuit-breaks with GLOBAL_CAP", async () => {
    const steps = (tag: string) => [
      ...Array.from({ length: 5 }, (_, i) => ({
        toolCalls: [{ name: "echo", input: { text: `${tag}${i}` } }],
      })),
      { toolCalls: [{ name: "finish", input: { answer: tag } }] },
    ];
    const reply = await suite.client.submit(
      spec({
        script: [
          {
            toolCalls: [
              {
                name: "spawn_agent",
                input: { runs: [spec({ script: steps("a") }), spec({ script: steps("b") })] },
              },
            ],
          },
          { toolCalls: [{ name: "finish", input: { answer: "parent" } }] },
        ],
        tools: ["spawn_agent", "echo"],
        capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
      }),
    );
    const parent = await suite.waitFor(reply.runId, settled, 30_000);
    const children = (await readFanOut(suite.bus.buckets.runs, reply.runId))?.children ?? [];
    expect(children).toHaveLength(2);
    const runs = [reply.runId, ...children];
    const statuses = await Promise.all(runs.map((id) => suite.waitFor(id, settled)));
    const capped = statuses.filter((s) => s.status === "failed" && s.terminal?.reason === "globalCap");
    expect(
      capped.length,
      JSON.stringify(statuses.map((s) => [s.runId, s.status, s.terminal?.reason, s.usage.modelCalls])),
    ).toBeGreaterThan(0);
    expect(statuses.every((s) => s.rootRunId === reply.runId)).toBe(true);
    let calls = 0;
    for (const id of runs) {
      const events = await suite.audit(id);
      calls += events.filter((e) => e.kind === "model.responded").length;
      if (capped.some((s) => s.runId === id)) {
        expect(events.find((e) => e.kind === "guard.circuit_break")).toMatchObject({
          data: { guardReason: "globalCap" },
        });
      }
    }
    expect(calls).toBeLessThanOrEqual(FULL_CLUSTER_TREE_CAP);
    // What the runs reserved and did not spend went back: the tree's counter holds the calls made.
    await expect.poll(() => readIterations(suite.bus, reply.runId), { timeout: 5_000 }).toBe(calls);
    expect(["committed", "failed"]).toContain(parent.status);
    // A spent tree admits no more children.
    await expect(
      suite.client.submit({ ...spec(), parent: { runId: reply.runId, depth: 0 } }),
    ).rejects.toMatchObject({ code: "GLOBAL_CAP" });
  }, 60_000);
});
