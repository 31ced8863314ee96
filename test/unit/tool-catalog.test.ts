import { describe, expect, it } from "vitest";
import { ToolCatalog } from "../../services/agent/tool-catalog.js";
import type { ToolDescriptor } from "../../shared/contracts/tool.js";
import { ManualClock } from "../../shared/runtime/clock.js";
import { describeTool } from "../../shared/tools/tool.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";

/** Services that describe `served` tools, counting every time each is asked. */
function services(served: Map<string, ToolDescriptor>) {
  const asked = new Map<string, number>();
  const describe = (name: string): Promise<ToolDescriptor | undefined> => {
    asked.set(name, (asked.get(name) ?? 0) + 1);
    return Promise.resolve(served.get(name));
  };
  return { describe, asked };
}

const echo = describeTool(echoTool);

describe("tool catalog", () => {
  it("reuses a descriptor for ttlMs, then asks the service again and sees what it says now", async () => {
    const served = new Map([["echo", echo]]);
    const { describe, asked } = services(served);
    const clock = new ManualClock(0);
    const catalog = new ToolCatalog(describe, clock, 5_000);
    expect(await catalog.lookup(["echo"])).toEqual([echo]);
    await clock.advance(4_999);
    expect(await catalog.lookup(["echo"])).toEqual([echo]);
    expect(asked.get("echo")).toBe(1);
    // Redeployed with a new timeout: seen once the old descriptor is older than the ttl.
    served.set("echo", { ...echo, timeoutMs: 1_234 });
    await clock.advance(1);
    expect(await catalog.lookup(["echo"])).toEqual([{ ...echo, timeoutMs: 1_234 }]);
    expect(asked.get("echo")).toBe(2);
  });

  it("a tool nobody serves is left out and asked for again by the next lookup; a tool gone after its ttl is dropped", async () => {
    const served = new Map<string, ToolDescriptor>([["echo", echo]]);
    const { describe, asked } = services(served);
    const clock = new ManualClock(0);
    const catalog = new ToolCatalog(describe, clock, 5_000);
    expect(await catalog.lookup(["missing", "echo"])).toEqual([echo]);
    expect(await catalog.lookup(["missing", "echo"])).toEqual([echo]);
    expect(asked.get("missing")).toBe(2);
    served.delete("echo");
    await clock.advance(5_000);
    expect(await catalog.lookup(["echo"])).toEqual([]);
    await clock.advance(1);
    expect(await catalog.lookup(["echo"])).toEqual([]);
    expect(asked.get("echo")).toBe(3);
  });

  it("concurrent lookups of a tool share one request; ttl 0 asks every time", async () => {
    const { describe, asked } = services(new Map([["echo", echo]]));
    const catalog = new ToolCatalog(describe, new ManualClock(0), 5_000);
    const all = await Promise.all([
      catalog.lookup(["echo"]),
      catalog.lookup(["echo"]),
      catalog.lookup(["echo"]),
    ]);
    expect(all).toEqual([[echo], [echo], [echo]]);
    expect(asked.get("echo")).toBe(1);
    const uncached = services(new Map([["echo", echo]]));
    const every = new ToolCatalog(uncached.describe, new ManualClock(0), 0);
    await every.lookup(["echo"]);
    await every.lookup(["echo"]);
    expect(uncached.asked.get("echo")).toBe(2);
  });
});
