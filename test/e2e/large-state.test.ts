import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { readLog } from "../../shared/bus/run-log.js";
import { PART_HEADER } from "../../shared/bus/wal-parts.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { defineTool } from "../../shared/tools/tool.js";
import { settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

/** Runs whose state outgrows one NATS message: the checkpoint is written in parts, and resumed from. */
const suite = useClusterSuite("largestate", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  env: { AGENT_ACK_WAIT_MS: "2000", AGENT_RETRY_DELAY_MS: "500" },
});

/** 60 KB of text, the same for the same n, that compression leaves large: a log body is compressed. */
function bulk(n: number): string {
  const blocks: Buffer[] = [createHash("sha512").update(String(n)).digest()];
  while (blocks.length * 64 < 45_000) blocks.push(createHash("sha512").update(blocks.at(-1)!).digest());
  return `${n}:${Buffer.concat(blocks).toString("base64")}`.slice(0, 60_000);
}

describe("runs whose checkpoints exceed max_payload", () => {
  it("ten 60 KB tool results (a transcript over 1 MiB) checkpoint in parts; kill -9 after the checkpoint: another worker resumes from it, every read once", async () => {
    const executions = new Map<number, number>();
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let onHold: () => void = () => undefined;
    const holding = new Promise<void>((resolve) => (onHold = resolve));
    suite.serveTool(
      defineTool({
        name: "read_file",
        description: "Reads a large file.",
        input: z.object({ n: z.number() }),
        capability: { kind: "compute" },
        reversibility: "reversible",
        idempotent: true,
        execute: async (input) => {
          executions.set(input.n, (executions.get(input.n) ?? 0) + 1);
          if (input.n === 14) {
            onHold();
            await held;
          }
          return { output: bulk(input.n) };
        },
      }),
    );
    const reads = 20;
    const reply = await suite.client.submit(
      spec({
        script: [
          ...Array.from({ length: reads }, (_, n) => ({ toolCalls: [{ name: "read_file", input: { n } }] })),
          { toolCalls: [{ name: "finish", input: { answer: "read them all" } }] },
        ],
        tools: ["read_file"],
        resources: { maxIterations: 30 },
      }),
    );
    await holding;
    const { jsm, subjects } = suite.bus;
    const { checkpointSeq } = await readLog(suite.bus, reply.runId);
    expect(checkpointSeq).toBeGreaterThan(0);
    const first = await jsm.streams.getMessage(subjects.streams().log, { seq: checkpointSeq as number });
    expect(first?.header?.get(PART_HEADER)).toMatch(/^1\/[2-9]$/);
    const holder = await suite.lastWriter(reply.runId);
    expect(holder).toMatch(/^agent-\d$/);
    suite.cluster.signal(holder as string, "SIGKILL");
    await systemClock.sleep(200);
    release();

    const status = await suite.waitFor(reply.runId, settled, 40_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "read them all" } });
    expect([...executions.entries()].sort(([a], [b]) => a - b)).toEqual(
      Array.from({ length: reads }, (_, n) => [n, 1]),
    );
    const events = await suite.audit(reply.runId);
    expect(events.filter((e) => e.kind === "run.resumed")).toHaveLength(1);
    // The checkpoint resumed from was larger than one message can be; its record says how large.
    const [resumedFrom] = (await suite.wal(reply.runId)).filter((r) => r.record.type === "CHECKPOINT");
    const bytes = resumedFrom?.record.type === "CHECKPOINT" ? resumedFrom.record.bytes : undefined;
    expect(bytes).toBeGreaterThan(suite.bus.nc.info?.max_payload ?? Infinity);
  }, 90_000);
});
