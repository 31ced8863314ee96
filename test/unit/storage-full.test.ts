import { JetStreamApiError } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { retryDelay } from "../../services/agent/lease-failure.js";
import { controlFailure } from "../../services/supervisor/control-failure.js";
import { casChange } from "../../shared/bus/cas.js";
import { askUntilDecided, isUndecided } from "../../shared/bus/decided.js";
import { BUDGET_MS, withBusRetry } from "../../shared/bus/retry.js";
import { isStorageFull, storageFull } from "../../shared/bus/storage-full.js";
import { InstantClock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { defineTool } from "../../shared/tools/tool.js";
import { registry, runner, spec } from "../helpers/fixtures.js";

/** JetStream's refusal of a write, as the server sends it. */
function refusal(errCode: number, description: string): JetStreamApiError {
  return new JetStreamApiError({ code: 503, err_code: errCode, description });
}

const FULL = refusal(10023, "insufficient resources");
const deps = (): { clock: InstantClock; random: ReturnType<typeof seededRandom> } => ({
  clock: new InstantClock(0),
  random: seededRandom(1),
});

describe("a write refused for a full JetStream store", () => {
  it("is told apart from other refusals: the server's store, a stream's reservation, the account's limits", () => {
    expect(isStorageFull(FULL)).toBe(true);
    expect(isStorageFull(refusal(10047, "insufficient storage resources available"))).toBe(true);
    expect(isStorageFull(refusal(10002, "resource limits exceeded for account"))).toBe(true);
    expect(isStorageFull(refusal(10071, "wrong last sequence: 3"))).toBe(false);
    expect(isStorageFull(new Error("insufficient resources"))).toBe(false);
    // The disk under the store full before max_file_store (nats-server 2.9.10's words, read off a
    // full tmpfs); a store failing for another reason is not.
    const disk = refusal(10077, "write /data/jetstream/$G/streams/W/msgs/1.blk: no space left on device");
    expect(storageFull("WAL append for run r1", disk)?.message).toMatch(
      /storage is full \(write .*no space left on device\).*free or grow the disk/,
    );
    expect(isStorageFull(refusal(10077, "write /data/x.blk: input/output error"))).toBe(false);
    // A tool's failure it caused (memory writing to a full store) is told as the store's.
    const toolFailed = new AgentError("TOOL_FAILED", "insufficient resources", { cause: FULL });
    expect(storageFull("tool 'memory'", toolFailed)).toMatchObject({
      code: "STORAGE_FULL",
      cause: toolFailed,
    });
    expect(storageFull("tool 'memory'", new AgentError("TOOL_FAILED", "no", { cause: new Error("x") }))).toBe(
      undefined,
    );
    const told = new AgentError("STORAGE_FULL", "said already");
    expect(storageFull("again", told)).toBe(told);
    expect(controlFailure(FULL)).toMatchObject({
      ok: false,
      error: { code: "STORAGE_FULL", retryable: true },
    });
    expect(controlFailure(new Error("timeout"))).toMatchObject({ ok: false, error: { code: "INTERNAL" } });
    const error = storageFull("WAL append for run r1", FULL);
    expect(error).toMatchObject({ code: "STORAGE_FULL", retryable: true, cause: FULL });
    expect(error?.message).toMatch(
      /^WAL append for run r1: .*storage is full \(insufficient resources\).*max_file_store/,
    );
  });

  it("fails at once through withBusRetry, not after an outage's 15 s, even a write given longer", async () => {
    for (const budgetMs of [BUDGET_MS, 4 * BUDGET_MS]) {
      let calls = 0;
      const d = deps();
      const write = withBusRetry("status put", d, () => (calls++, Promise.reject(FULL)), undefined, budgetMs);
      await expect(write).rejects.toMatchObject({ code: "STORAGE_FULL" });
      expect(calls).toBe(1);
      expect(d.clock.now()).toBe(0);
    }
  });

  it("fails a compare-and-set at its first write, not as 200 lost races", async () => {
    let writes = 0;
    const kv = {
      get: () => Promise.resolve(null),
      create: () => (writes++, Promise.reject(FULL)),
      update: () => (writes++, Promise.reject(FULL)),
    } as unknown as KV;
    const change = casChange({ kv, ...deps() }, "active", z.object({ n: z.number() }), { n: 0 }, (s) => ({
      result: s.n + 1,
      next: { n: s.n + 1 },
    }));
    const error = await change.catch((err: unknown) => err);
    expect(error).toMatchObject({ code: "STORAGE_FULL" });
    expect((error as Error).message).toMatch(/^writing key 'active'/);
    expect(writes).toBe(1);
  });

  it("hands a run back for longer each time, up to a minute, like a provider's outage", () => {
    const full = new AgentError("STORAGE_FULL", "full");
    expect([1, 2, 3, 8, 20].map((delivery) => retryDelay(full, delivery, 500))).toEqual([
      500, 1_000, 2_000, 60_000, 60_000,
    ]);
    expect(retryDelay(new AgentError("BUS_UNAVAILABLE", "down"), 8, 500)).toBe(500);
  });

  it("is answered to a client at once: a full store is not asked again within its wait, an undecided request is", async () => {
    const ask = (code: string): Promise<number> => {
      let asked = 0;
      const wait = { waitMs: 10_000, ...deps() };
      const refused: { ok: false; error: { code: string } } = { ok: false, error: { code } };
      return askUntilDecided(wait, () => {
        asked++;
        return Promise.resolve(refused);
      }).then(() => asked);
    };
    // No decision all the same: not recorded as a run's rejection, nor as a spawned child's failure.
    expect(isUndecided({ code: "STORAGE_FULL" })).toBe(true);
    expect(await ask("STORAGE_FULL")).toBe(1);
    expect(await ask("INTERNAL")).toBeGreaterThan(1);
  });

  it("stops a run where its tool call could not be recorded, instead of telling the model the tool failed", async () => {
    const recorded = defineTool({
      name: "book",
      description: "a tool whose service records each call",
      input: z.object({}),
      capability: { kind: "compute" },
      reversibility: "irreversible",
      idempotent: false,
      execute: () => {
        throw storageFull("claiming book:r1:a1", FULL) ?? new Error("not a full store");
      },
    });
    const run = runner({ registry: registry(recorded) }).run(
      spec({
        script: [{ toolCalls: [{ name: "book", input: {} }] }, { text: "booked" }],
        tools: ["book"],
      }),
    );
    await expect(run).rejects.toMatchObject({ code: "STORAGE_FULL" });
  });
});
