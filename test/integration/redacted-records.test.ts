import { Kvm, type KV } from "@nats-io/kv";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { decode, encode } from "../../shared/bus/codec.js";
import { IdempotencyRecord, idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import { serveToolsOf } from "../../shared/bus/tool-service.js";
import { ToolCallReply, ToolCallRequest, ToolDescriptor } from "../../shared/contracts/tool.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { REDACTED } from "../../shared/tools/redaction.js";
import { defineTool } from "../../shared/tools/tool.js";
import { useBusSuite } from "../helpers/bus-suite.js";

const suite = useBusSuite("rr");
const SECRET = "sk-RECORDabcdef123";
let runs = 0;

/** A side effect whose descriptor redacts its token; it fails once with the key in its message. */
const issue = defineTool({
  name: "issue",
  description: "issues a token for a key",
  input: z.object({ apiKey: z.string() }),
  capability: { kind: "compute" },
  reversibility: "irreversible",
  idempotent: false,
  redact: { paths: ["output.token"] },
  execute: (input) => {
    runs += 1;
    if (input.apiKey === "bad") return Promise.reject(new AgentError("TOOL_FAILED", `key ${SECRET} refused`));
    return Promise.resolve({ output: { token: `tok-${input.apiKey}`, note: `for ${input.apiKey}` } });
  },
});
/** A pure, idempotent tool: it keeps no record, and its answer is redacted all the same. */
const lookup = defineTool({
  name: "lookup",
  description: "answers the key it is given",
  input: z.object({ apiKey: z.string() }),
  capability: { kind: "compute" },
  execute: (input) => Promise.resolve({ output: `found ${input.apiKey}` }),
});
let idempotency: KV;

beforeAll(async () => {
  idempotency = await new Kvm(suite.nc).open(suite.subjects.buckets().idempotency);
  const bus = {
    nc: suite.nc,
    subjects: suite.subjects,
    buckets: { idempotency } as never,
    clock: systemClock,
    random: seededRandom(3),
  };
  // The operators' rules (TOOLS_REDACT_FILE) on top of the tool's own.
  serveToolsOf([issue, lookup], bus, {
    logger: silentLogger,
    redaction: { tools: { "*": { patterns: ["sk-\\w+"] } } },
  });
  await suite.nc.flush();
});

async function call(input: unknown, key: string, tool = "issue"): Promise<ToolCallReply> {
  const body = encode(ToolCallRequest, {
    schemaVersion: 1,
    runId: "r1",
    actionId: "a1",
    idempotencyKey: key,
    input,
    deadline: Date.now() + 10_000,
  });
  const msg = await suite.nc.request(suite.subjects.tool(tool), body, { timeout: 5_000 });
  return decode(ToolCallReply, msg.data);
}

async function recorded(key: string): Promise<string> {
  const entry = await idempotency.get(idempotencyBucketKey("issue", key));
  return new TextDecoder().decode(entry?.value);
}

describe("a tool service records redacted results", () => {
  it("describes its redaction rules with the tool", async () => {
    const msg = await suite.nc.request(suite.subjects.toolDescribe("issue"), new Uint8Array(), {
      timeout: 5_000,
    });
    expect(decode(ToolDescriptor, msg.data).redact).toEqual({ paths: ["output.token"] });
  });

  it("the caller is answered with what is recorded, redacted by the tool's path and the operators' pattern, and a repeated key is answered the same", async () => {
    const first = await call({ apiKey: SECRET }, "r1:k1");
    expect(first).toEqual({ ok: true, output: { token: REDACTED, note: `for ${REDACTED}` } });
    const record = await recorded("r1:k1");
    expect(record).not.toContain(SECRET);
    expect(decode(IdempotencyRecord, new TextEncoder().encode(record))).toMatchObject({
      status: "done",
      reply: { ok: true, output: { token: REDACTED, note: `for ${REDACTED}` } },
    });
    expect(await call({ apiKey: SECRET }, "r1:k1")).toEqual({
      ok: true,
      output: { token: REDACTED, note: `for ${REDACTED}` },
    });
    expect(runs).toBe(1);
  });

  it("a terminal failure is recorded with its message redacted", async () => {
    expect(await call({ apiKey: "bad" }, "r1:k2")).toMatchObject({
      ok: false,
      error: { code: "TOOL_FAILED", message: `key ${REDACTED} refused` },
    });
    const record = await recorded("r1:k2");
    expect(record).not.toContain(SECRET);
    expect(record).toContain(`key ${REDACTED} refused`);
  });

  it("a tool that keeps no record answers redacted by the operators' rules too", async () => {
    expect(await call({ apiKey: SECRET }, "r1:k3", "lookup")).toEqual({
      ok: true,
      output: `found ${REDACTED}`,
    });
  });
});
