import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishAudit, readAudit, type AuditDeps } from "../../shared/bus/audit.js";
import { connectBus } from "../../shared/bus/connect.js";
import { provision } from "../../shared/bus/provision.js";
import { Subjects } from "../../shared/bus/subjects.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { InstantClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { echoCall, runner, spec } from "../helpers/fixtures.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";

const subjects = new Subjects(`a${process.pid}x${Date.now().toString(36)}`);
let server: TestNats;
let nc: NatsConnection;
let deps: AuditDeps & { jsm: JetStreamManager };

beforeAll(async () => {
  server = await startNats();
  nc = await connectBus({ servers: server.url, name: "audit-test", logger: silentLogger });
  await provision(nc, { subjects, replicas: 1 });
  deps = {
    js: jetstream(nc),
    jsm: await jetstreamManager(nc),
    subjects,
    clock: new InstantClock(0),
    random: seededRandom(1),
  };
});

afterAll(async () => {
  await nc?.drain();
  await server?.stop();
});

async function collect(options: Parameters<typeof readAudit>[1]): Promise<AuditEvent[]> {
  const events: AuditEvent[] = [];
  for await (const event of readAudit(deps, options)) events.push(event);
  return events;
}

describe("the audit stream on JetStream", () => {
  it("a subscriber sees every event of a run, schema-valid, in order, seq gapless from 1", async () => {
    const result = await runner().run(spec({ script: [echoCall("x"), { text: "done" }] }), {
      runId: "audited",
    });
    for (const event of result.audit) await publishAudit(deps, event);
    const other = await runner().run(spec(), { runId: "other-run" });
    for (const event of other.audit) await publishAudit(deps, event);

    const events = await collect({ runId: "audited" });
    expect(events).toEqual(result.audit);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.at(-1)?.kind).toBe("run.committed");
    expect(await collect({})).toHaveLength(result.audit.length + other.audit.length);
    expect(await collect({ limit: 3 })).toHaveLength(3);
    expect(await collect({ runId: "nobody" })).toEqual([]);
  });

  it("re-publishing an event (a resumed worker, a retry) does not store it twice", async () => {
    const result = await runner().run(spec(), { runId: "republished" });
    for (const event of result.audit) await publishAudit(deps, event);
    for (const event of result.audit) await publishAudit(deps, event);
    expect(await collect({ runId: "republished" })).toHaveLength(result.audit.length);
  });
});
