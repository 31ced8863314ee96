import { headlineOf } from "../../shared/contracts/log.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { decode, encode } from "../../shared/bus/codec.js";
import { InvalidArgumentError } from "@nats-io/transport-node";
import { withBusRetry } from "../../shared/bus/retry.js";
import { HEADER_ROOM, PartAssembler, recordMessages, splitRecord } from "../../shared/bus/wal-parts.js";
import { bucketStream, Subjects } from "../../shared/bus/subjects.js";
import { InstantClock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { ToolCallRequest } from "../../shared/contracts/tool.js";

describe("subjects", () => {
  const s = new Subjects();

  it("builds every subject of the wire contract under the prefix", () => {
    expect(s.runsSubmit()).toBe("agents.runs.submit");
    expect(s.runQueue("r-1")).toBe("agents.runs.queue.r-1");
    expect(s.log("r_1", "step")).toBe("agents.log.r_1.step");
    expect(s.log("r1", "run.committed")).toBe("agents.log.r1.run.committed");
    expect(s.logAll()).toBe("agents.log.>");
    expect(s.logAll("r1")).toBe("agents.log.r1.>");
    expect(s.logLifecycle()).toBe("agents.log.*.run.*");
    expect(s.rejected("r1")).toBe("agents.rejected.r1");
    expect(s.tool("http_fetch")).toBe("agents.tools.http_fetch");
    expect(s.criticReview()).toBe("agents.critic.review");
    expect(s.criticPing()).toBe("agents.critic.ping");
    expect(s.approvals("r1")).toBe("agents.approvals.r1");
    expect(s.killSwitch()).toBe("agents.control.killswitch");
    expect(s.supervisorPing()).toBe("agents.control.ping");
    expect(s.treeCounter("r1", "iterations")).toBe("agents.counters.r1.iterations");
    expect(s.countersAll()).toBe("agents.counters.>");
    expect(s.streams()).toEqual({ runs: "AGENT_RUNS", log: "AGENT_LOG", counters: "AGENT_COUNTERS" });
    expect(s.buckets()).toEqual({
      runs: "agents-runs",
      pool: "agents-pool",
      idempotency: "agents-idempotency",
      memory: "agents-memory",
      toolState: "agents-tool-state",
      modelBreakers: "agents-model-breakers",
      toolDescriptors: "agents-tool-descriptors",
      redactedInputs: "agents-redacted-inputs",
    });
    expect(s.storeStreams()).toEqual([
      "AGENT_RUNS",
      "AGENT_LOG",
      "AGENT_COUNTERS",
      ...s.bucketList().map((bucket) => `KV_${bucket}`),
    ]);
    expect(s.storeStreams()).toHaveLength(11);
    expect(
      s
        .stores()
        .filter((store) => store.kind === "stream")
        .map((store) => store.name),
    ).toEqual(["AGENT_RUNS", "AGENT_LOG", "AGENT_COUNTERS"]);
    expect(s.stores().filter((store) => store.kind === "bucket")).toHaveLength(8);
    expect(bucketStream("agents-runs")).toBe("KV_agents-runs");
    expect(new Subjects("team-a").streams()).toEqual({
      runs: "TEAM_A_RUNS",
      log: "TEAM_A_LOG",
      counters: "TEAM_A_COUNTERS",
    });
  });

  it("refuses tokens that would widen or break a subject", () => {
    for (const bad of ["a.b", "*", ">", "", "x y", "a".repeat(65)]) {
      expect(() => s.logAll(bad), bad).toThrow(expect.objectContaining({ code: "INVALID_INPUT" }));
      expect(() => s.treeCounter(bad, "iterations"), bad).toThrow(/rootRunId/);
    }
    expect(() => s.log("r1", "Tool.Intent")).toThrow(/dotted lowercase/);
    expect(() => s.log("r1", "tool.>")).toThrow();
    expect(() => new Subjects("a.b")).toThrow(/prefix/);
  });
});

describe("codec", () => {
  const request: ToolCallRequest = {
    schemaVersion: 1,
    runId: "r1",
    actionId: "a1",
    idempotencyKey: "k",
    input: { x: 1 },
    deadline: 5,
  };

  it("round-trips a valid payload", () => {
    expect(decode(ToolCallRequest, encode(ToolCallRequest, request))).toEqual(request);
  });

  it("turns malformed bytes and schema violations into INVALID_INPUT with the issues", () => {
    expect(() => decode(ToolCallRequest, new TextEncoder().encode("{not json"))).toThrow(
      expect.objectContaining({ code: "INVALID_INPUT" }),
    );
    expect(() => decode(ToolCallRequest, new Uint8Array([0xff, 0xfe]))).toThrow(/UTF-8 JSON/);
    const bad = (() => {
      try {
        decode(ToolCallRequest, new TextEncoder().encode(JSON.stringify({ ...request, runId: "bad id" })));
      } catch (e) {
        return e as { code: string; details: unknown };
      }
    })();
    expect(bad?.code).toBe("INVALID_INPUT");
    expect(JSON.stringify(bad?.details)).toContain("runId");
  });

  it("refuses to send what does not match its own schema", () => {
    expect(() => encode(z.object({ n: z.number() }), { n: "x" } as never)).toThrow(/refusing to send/);
  });
});

describe("withBusRetry", () => {
  const deps = () => ({ clock: new InstantClock(0), random: seededRandom(1) });

  it("retries transient failures until the publish lands", async () => {
    let calls = 0;
    const result = await withBusRetry("p", deps(), () =>
      ++calls < 3 ? Promise.reject(new Error("timeout")) : Promise.resolve("ok"),
    );
    expect([result, calls]).toEqual(["ok", 3]);
  });

  it("stops at once on an error classified fatal or already typed", async () => {
    let calls = 0;
    const fenced = new AgentError("FENCED", "lost");
    await expect(
      withBusRetry(
        "p",
        deps(),
        () => (calls++, Promise.reject(new Error("x"))),
        () => fenced,
      ),
    ).rejects.toBe(fenced);
    await expect(withBusRetry("p", deps(), () => (calls++, Promise.reject(fenced)))).rejects.toBe(fenced);
    expect(calls).toBe(2);
  });

  it("a message over the server's max_payload fails at once with PAYLOAD_TOO_LARGE, not after 15 s of retries", async () => {
    let calls = 0;
    const d = deps();
    const refused = InvalidArgumentError.format("payload", "max_payload size exceeded");
    await expect(
      withBusRetry("status put", d, () => (calls++, Promise.reject(refused))),
    ).rejects.toMatchObject({ code: "PAYLOAD_TOO_LARGE", retryable: false });
    expect([calls, d.clock.now()]).toEqual([1, 0]);
  });

  it("rides out a leader election, then gives up with BUS_UNAVAILABLE after 15 s", async () => {
    let calls = 0;
    const d = deps();
    await expect(
      withBusRetry("audit publish", d, () => (calls++, Promise.reject(new Error("down")))),
    ).rejects.toMatchObject({
      code: "BUS_UNAVAILABLE",
      message: expect.stringMatching(/^audit publish failed after \d+ attempts$/) as unknown,
    });
    expect(d.clock.now()).toBeGreaterThanOrEqual(15_000);
    expect(d.clock.now()).toBeLessThan(15_000 + 2_000);
    expect(calls).toBeGreaterThan(6);
  });
});

describe("WAL parts", () => {
  const bytes = (n: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => i % 251);
  const header = (i: number, n: number): string => `${i}/${n}`;

  it("splits a record into slices of at most the limit that join back to the same bytes", () => {
    expect(splitRecord(bytes(10), 10)).toHaveLength(1);
    const parts = splitRecord(bytes(25), 10);
    expect(parts.map((p) => p.length)).toEqual([10, 10, 5]);
    const a = new PartAssembler();
    expect(a.push(7, parts[0]!, header(1, 3))).toBeUndefined();
    expect(a.push(8, parts[1]!, header(2, 3))).toBeUndefined();
    expect(a.push(9, parts[2]!, header(3, 3))).toEqual({ seq: 7, data: bytes(25) });
    expect(() => splitRecord(bytes(3), 0)).toThrow(/at least one byte/);
    // As stored: room for headers is kept in every message, and only a split record has part headers.
    expect(recordMessages(bytes(10))).toEqual([{ data: bytes(10) }]);
    const stored = recordMessages(bytes(5_000), HEADER_ROOM + 2_000);
    expect(stored.map((m) => [m.data.length, m.part])).toEqual([
      [2_000, "1/3"],
      [2_000, "2/3"],
      [1_000, "3/3"],
    ]);
  });

  it("drops the prefix a dead writer left and assembles its successor's rewrite from part 1", () => {
    const parts = splitRecord(bytes(30), 10);
    const a = new PartAssembler();
    a.push(1, parts[0]!, header(1, 3));
    a.push(2, parts[1]!, header(2, 3));
    // The writer died here; its successor writes the record again.
    expect(a.push(3, parts[0]!, header(1, 3))).toBeUndefined();
    a.push(4, parts[1]!, header(2, 3));
    expect(a.push(5, parts[2]!, header(3, 3))).toEqual({ seq: 3, data: bytes(30) });
    // An unsplit record after a lone prefix comes through; a stray middle part never assembles.
    a.push(6, parts[0]!, header(1, 3));
    expect(a.push(7, bytes(4), undefined)).toEqual({ seq: 7, data: bytes(4) });
    expect(a.push(8, parts[2]!, header(3, 3))).toBeUndefined();
    expect(() => a.push(9, bytes(1), "3/2")).toThrow(/bad part header/);
  });
});

describe("a log message's headline", () => {
  const of = (...kinds: string[]) => headlineOf(kinds.map((kind) => ({ kind }) as Pick<AuditEvent, "kind">));

  it("names the run's lifecycle before a human's part, and a plain step as step", () => {
    expect(of("model.called", "model.responded")).toBe("step");
    expect(of()).toBe("step");
    expect(of("run.admitted")).toBe("run.admitted");
    expect(of("approval.decided", "tool.intent", "run.committed")).toBe("run.committed");
    expect(of("run.resumed", "model.called", "run.halted")).toBe("run.halted");
    expect(of("phase.entered", "approval.requested")).toBe("approval.requested");
    expect(of("run.resumed", "approval.decided")).toBe("run.resumed");
  });
});
