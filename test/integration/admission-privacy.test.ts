import { beforeAll, describe, expect, it } from "vitest";
import { readAudit } from "../../shared/bus/audit.js";
import { encode } from "../../shared/bus/codec.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { SubmitRequest } from "../../shared/contracts/cluster.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { Admission } from "../../services/supervisor/admission.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { spec } from "../helpers/fixtures.js";

const suite = useActorBus("privacy", { random: seededRandom(13) });
let admission: Admission;
let pool: PoolLedger;

beforeAll(() => {
  pool = PoolLedger.of(suite.bus);
  admission = new Admission(
    suite.bus,
    pool,
    { poolCapacity: 10, maxDepth: 3, treeIterationCap: 100 },
    uuidIds,
  );
});

type Agent = ReturnType<typeof spec>["agent"];

/** A named run asking for `model` (and a critic's), under `privacy` when given. */
function submit(
  runId: string,
  over: { model: Agent["model"]; privacy?: Agent["privacy"]; critic?: Agent["model"] },
) {
  const asked = spec();
  asked.agent.model = over.model;
  if (over.privacy) asked.agent.privacy = over.privacy;
  if (over.critic) asked.critic = { model: over.critic };
  return admission.submit(encode(SubmitRequest, { ...SubmitRequest.parse(asked), runId }));
}

describe("a model the run's privacy tier forbids", () => {
  it("is refused at the submit (PRIVACY_DENIED, which model and what to change), taking no slot; an allowed one is admitted", async () => {
    const hosted = { provider: "openai", model: "gpt-x" } as const;
    expect(await submit("sovereign-hosted", { model: hosted })).toMatchObject({
      ok: false,
      error: {
        code: "PRIVACY_DENIED",
        message:
          "agent.model: model 'openai:gpt-x' is remote (https://api.openai.com/v1), which privacy tier 'sovereign' (the default) forbids; set agent.privacy to 'private' or 'standard', or use a loopback baseUrl",
      },
    });
    const critic = await submit("sovereign-critic", {
      model: { provider: "scripted", script: [{ text: "hi" }] },
      critic: { provider: "anthropic", model: "claude-x" },
    });
    expect(critic).toMatchObject({
      ok: false,
      error: {
        code: "PRIVACY_DENIED",
        message: expect.stringMatching(/^critic\.model: model 'anthropic:claude-x' is remote/) as unknown,
      },
    });
    for (const runId of ["sovereign-hosted", "sovereign-critic"]) {
      expect(await new RunStatusStore(suite.bus.buckets.runs).get(runId)).toBeUndefined();
      const trail = [];
      for await (const event of readAudit(suite.bus, { runId })) trail.push(event.kind);
      expect(trail).toEqual(["run.rejected"]);
    }
    expect(await pool.active()).toEqual([]);

    // On loopback the endpoint is local; another tier lets a hosted model be called.
    const local = { provider: "openai", model: "llama", baseUrl: "http://127.0.0.1:11434/v1" } as const;
    expect(await submit("sovereign-local", { model: local })).toMatchObject({ ok: true, status: "admitted" });
    expect(await submit("private-hosted", { model: hosted, privacy: "private" })).toMatchObject({
      ok: true,
      status: "admitted",
    });
    expect((await pool.active()).sort()).toEqual(["private-hosted", "sovereign-local"]);
  }, 30_000);
});
