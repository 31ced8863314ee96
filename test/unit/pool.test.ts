import { describe, expect, it } from "vitest";
import { AgentPool } from "../../shared/loop/pool.js";
import { sequentialIds } from "../../shared/runtime/ids.js";
import { runner, spec } from "../helpers/fixtures.js";
import type { RunResult } from "../../shared/loop/runner.js";

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe("AgentPool", () => {
  it("INV-008 a spawn at capacity is refused with a circuit break [test_pool_capacity_limit]", async () => {
    const g = gate();
    const pool = new AgentPool(
      2,
      async () => {
        await g.opened;
        return "done";
      },
      sequentialIds(),
    );
    pool.spawn(spec());
    pool.spawn(spec());
    expect(pool.activeCount()).toBe(2);
    expect(() => pool.spawn(spec())).toThrow(/circuit break: pool full/);
    expect(() => pool.spawn(spec())).toThrow(expect.objectContaining({ code: "POOL_FULL" }));
    expect(pool.activeCount()).toBe(2);
    g.open();
    await pool.joinAll();
    expect(pool.activeCount()).toBe(0);
    expect(() => pool.spawn(spec())).not.toThrow();
  });

  it("INV-009 fan-out of N specs spawns exactly N agents [test_pool_fan_out_fan_in]", async () => {
    const r = runner();
    const pool = new AgentPool<RunResult>(5, (s, id) => r.run(s, { runId: id }), sequentialIds());
    pool.spawn(spec({ script: [{ text: "first" }] }));
    const before = pool.activeCount();
    const ids = pool.fanOut([
      spec({ script: [{ text: "a" }] }),
      spec({ script: [{ text: "b" }] }),
      spec({ script: [{ text: "c" }] }),
    ]);
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(3);
    expect(pool.activeCount()).toBe(before + 3);
    const results = await pool.joinAll(ids);
    expect([...results.keys()]).toEqual(ids);
    expect([...results.values()].map((s) => (s.ok ? s.value.state.terminal?.output : s.error.code))).toEqual([
      "a",
      "b",
      "c",
    ]);
    expect(() => pool.fanOut(Array.from({ length: 6 }, () => spec()))).toThrow(/does not fit/);
    expect(pool.activeCount()).toBe(0);
  });

  it("INV-010 joinAll returns one result per spawned agent, failures included [test_pool_join_all]", async () => {
    const pool = new AgentPool<string>(
      10,
      (_s, id) => (id.endsWith("2") ? Promise.reject(new Error("boom")) : Promise.resolve(`ok ${id}`)),
      sequentialIds(),
    );
    const ids = pool.fanOut([spec(), spec(), spec(), spec()]);
    const results = await pool.joinAll();
    expect(results.size).toBe(ids.length);
    const failed = results.get(ids[1] as string);
    expect(failed?.ok).toBe(false);
    expect(failed && !failed.ok ? [failed.error.code, failed.error.message] : []).toEqual([
      "INTERNAL",
      "boom",
    ]);
    expect([...results.values()].filter((r) => r.ok)).toHaveLength(3);
    expect((await pool.joinAll()).size).toBe(0);
  });
});
