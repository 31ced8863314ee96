import { describe, expect, it } from "vitest";
import { SubmitReply } from "../../shared/contracts/control.js";
import { failureReply, serve } from "../../shared/bus/serve.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { startNats } from "../helpers/nats-server.js";
import { AGENTCTL, credentials, runProcess } from "../helpers/cluster-suite.js";

const suite = useBusSuite("ctlwait");

/** `agentctl submit` from flags against the suite's server, which has no supervisor of its own. */
function submit(
  waitMs: number,
  natsUrl = suite.server.url,
): Promise<{ stdout: string; stderr: string; ms: number; code: number }> {
  const began = Date.now();
  const args = ["submit", "--prompt", "p", "--model", "scripted:hi", "--name", "n", "--tools", ""];
  return runProcess(process.execPath, [AGENTCTL, ...args], {
    env: {
      ...process.env,
      NATS_URL: natsUrl,
      AGENTS_PREFIX: suite.subjects.prefix,
      AGENTCTL_WAIT_MS: String(waitMs),
      ...credentials(suite.server),
    },
  }).then(
    ({ stdout, stderr }) => ({ stdout, stderr, ms: Date.now() - began, code: 0 }),
    (err: { stdout: string; stderr: string; code: number }) => ({ ...err, ms: Date.now() - began }),
  );
}

describe("agentctl and a supervisor that is not there yet", () => {
  it("waits for one (AGENTCTL_WAIT_MS), says so, and gives up with BUS_UNAVAILABLE when none comes; 0 gives up at once", async () => {
    const waited = await submit(1_500);
    expect(waited.code).not.toBe(0);
    expect(waited.stderr).toMatch(/no supervisor answers yet: waiting up to 1500 ms/);
    const last = JSON.parse(waited.stderr.trim().split("\n").at(-1) ?? "{}") as { error?: { code: string } };
    expect(last.error?.code).toBe("BUS_UNAVAILABLE");
    const atOnce = await submit(0);
    expect(atOnce.code).not.toBe(0);
    expect(atOnce.stderr).not.toMatch(/waiting up to/);
    // The process's own start is most of both; the wait is what differs.
    expect(waited.ms - atOnce.ms).toBeGreaterThan(1_000);
  }, 30_000);

  it("a submit made while the supervisor restarts is answered once it is back", async () => {
    const submitted = submit(10_000);
    // A supervisor that starts serving after agentctl has asked (the process starts in about 0.5 s).
    await systemClock.sleep(2_000);
    const sub = serve(suite.nc, suite.subjects.runsSubmit(), {
      queue: "supervisor",
      reply: SubmitReply,
      logger: silentLogger,
      handle: () =>
        Promise.resolve({
          schemaVersion: 1 as const,
          ok: true as const,
          runId: "run-late",
          status: "admitted" as const,
        }),
      onError: failureReply,
    });
    const result = await submitted;
    sub.unsubscribe();
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe("admitted run-late");
    expect(result.stderr).toMatch(/no supervisor answers yet/);
  }, 30_000);

  it("waits for a NATS server the same way, and gives up with BUS_UNAVAILABLE, not a stack trace", async () => {
    const gone = await startNats({ own: true });
    await gone.stop();
    const waited = await submit(1_500, gone.url);
    expect(waited.code).not.toBe(0);
    expect(waited.stderr).toMatch(/no NATS server answers yet: waiting up to 1500 ms/);
    const last = JSON.parse(waited.stderr.trim().split("\n").at(-1) ?? "{}") as { error?: { code: string } };
    expect(last.error?.code).toBe("BUS_UNAVAILABLE");
    const atOnce = await submit(0, gone.url);
    expect(atOnce.stderr).not.toMatch(/waiting up to/);
    expect(waited.ms - atOnce.ms).toBeGreaterThan(1_000);
  }, 30_000);
});
