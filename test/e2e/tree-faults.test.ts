import { describe, expect, it } from "vitest";
import { serveModel } from "../../shared/bus/model-actor.js";
import { readIterations } from "../../shared/bus/tree-iterations.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import {
  expectChargesInTrail,
  payingActorRun,
  payingPlanner,
  serveCharge,
  settled,
} from "../helpers/cluster-suite.js";
import { useFaultSuite } from "../helpers/fault-suite.js";
import { spec } from "../helpers/fixtures.js";
import { until } from "../helpers/until.js";

const PARENTS = 4;
const CHILDREN = 3;
const PAYMENTS = 6;
/** Long enough that every fault below finds children paying. */
const PAYMENT_MS = 600;
/** The children's model actor, served by the test, which counts the turns it is asked. */
const PLANNER = "payer";
const TURN_MS = 100;
/**
 * Each tree's model calls are the parent's 2 (scripted) and 7 per child; the cap leaves room for
 * the iterations children reserve ahead of need, which a sibling near the cap would otherwise be
 * refused, and for those a killed worker had reserved, which stay counted.
 */
const TREE_CAP = 60;
/**
 * Run trees under faults: each parent fans out to children that pay, and parks while they run.
 * A worker is killed, the nats-server restarted, the supervisor killed (it queues a parent again
 * once its last child settles), two workers killed at once.
 */
const suite = useFaultSuite("tree-faults", { SUPERVISOR_TREE_ITERATION_CAP: String(TREE_CAP) });

/** A parent that fans out to CHILDREN paying children, then answers once they are all back. */
function parentRun(parent: number): ReturnType<typeof spec> {
  const children = Array.from({ length: CHILDREN }, (_, c) =>
    payingActorRun("pay", PAYMENTS, PLANNER, `tree ${parent} child ${c}`),
  );
  return spec({
    script: [
      { toolCalls: [{ name: "spawn_agent", input: { runs: children } }] },
      { toolCalls: [{ name: "finish", input: { answer: `fanned in ${parent}` } }] },
    ],
    // A child is given only what its parent has.
    tools: ["spawn_agent", "pay"],
    capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
  });
}

describe("run trees: workers killed, the nats-server restarted and the supervisor killed while children pay", () => {
  it("every parent commits with its children's answers in order, every payment happens once and is in its child's trail", async () => {
    const { executions } = serveCharge(suite, PAYMENT_MS, "pay");
    const planner = payingPlanner("pay", PAYMENTS, (prompt) => `answered ${prompt}`, TURN_MS);
    serveModel(PLANNER, planner.complete, { ...suite.bus, logger: silentLogger });
    const parents: string[] = [];
    for (let p = 0; p < PARENTS; p += 1) parents.push((await suite.client.submit(parentRun(p))).runId);
    let next = 4;
    // When the last fault struck: its kills, not its replacements' start, which a loaded host can
    // take seconds over while the other workers go on (a tree committed meanwhile was struck too).
    let lastFaultAt = 0;
    const replace = async (...victims: string[]): Promise<string[]> => {
      for (const victim of victims) suite.cluster.signal(victim, "SIGKILL");
      lastFaultAt = Date.now();
      const started = victims.map(() => `agent-${next++}`);
      await Promise.all(started.map((name) => suite.cluster.start("agent", name)));
      return started;
    };
    await until(() => executions.size >= PARENTS, 20_000, { what: "children paying" });
    const [a4] = await replace("agent-1");
    await systemClock.sleep(700);
    await suite.server.restart?.({ downMs: 1_500 });
    await systemClock.sleep(700);
    suite.cluster.signal("supervisor", "SIGKILL");
    await systemClock.sleep(200);
    await suite.cluster.start("supervisor", "supervisor");
    await systemClock.sleep(700);
    await replace("agent-2", a4 as string);

    const statuses = await Promise.all(parents.map((id) => suite.waitFor(id, settled, 60_000)));
    // Nothing settled before the last fault: every fault struck trees at work.
    expect(lastFaultAt).toBeLessThan(Math.min(...statuses.map((s) => Date.parse(s.updatedAt))));
    let resumed = 0;
    for (const [p, runId] of parents.entries()) {
      const status = statuses[p];
      expect(status, `${runId}: ${status?.terminal?.kind} ${status?.terminal?.reason}`).toMatchObject({
        status: "committed",
        terminal: { output: `fanned in ${p}` },
      });
      const fanIn = (await suite.wal(runId)).map((r) => r.record).find((r) => r.type === "COMPLETE");
      const output = (fanIn?.type === "COMPLETE" ? fanIn.event.output : undefined) as {
        results: { runId: string; status: string; output?: string }[];
      };
      expect(output.results.map((r) => [r.status, r.output])).toEqual(
        Array.from({ length: CHILDREN }, (_, c) => ["committed", `answered tree ${p} child ${c}`]),
      );
      await expectChargesInTrail(suite, runId, "pay", executions);
      for (const child of output.results) {
        const events = await expectChargesInTrail(suite, child.runId, "pay", executions);
        resumed += events.filter((e) => e.kind === "run.resumed").length;
      }
    }
    // The faults hit children in flight: some were taken over.
    expect(resumed).toBeGreaterThan(0);
    // Every model turn the children were asked, and the parent's two, were reserved on the tree's
    // counter. What a killed worker had reserved and not spent stays counted, and so does a turn
    // it had out (its run's next worker asks it again): the counter holds at least the turns
    // made, never more than the cap.
    for (const [p, runId] of parents.entries()) {
      const turns = [...planner.asked.keys()].filter((k) => k.startsWith(`tree ${p} child `)).length;
      expect(turns).toBe(CHILDREN * (PAYMENTS + 1));
      // A run's worker gives back what it did not spend once it lets the run go, after the COMMIT
      // the test waited for: read the count once two reads agree.
      let used = -1;
      await until(async () => used === (used = await readIterations(suite.bus, runId)), 10_000, {
        what: `${runId}'s counter settled`,
        everyMs: 300,
      });
      expect(used, runId).toBeGreaterThanOrEqual(turns + 2);
      expect(used, runId).toBeLessThanOrEqual(TREE_CAP);
    }
    expect(executions.size).toBe(PARENTS * CHILDREN * PAYMENTS);
    expect([...executions.values()].every((n) => n === 1)).toBe(true);
  }, 120_000);
});
