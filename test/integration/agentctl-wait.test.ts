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
): Promise<{ stdout: string; stderr: string; code: number }> {
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
    ({ stdout, stderr }) => ({ stdout, stderr, code: 0 }),
    (err: { stdout: string; stderr: string; code: number }) => err,
  );
}

/** The structured error agentctl ends with, its stderr's last line. */
function lastError(stderr: string): { code?: string; message: string } {
  const line = JSON.parse(stderr.trim().split("\n").at(-1) ?? "{}") as {
    error?: { code?: string; message?: string };
  };
  return { code: line.error?.code, message: line.error?.message ?? "" };
}

describe("agentctl and a supervisor that is not there yet", () => {
  it("waits for one (AGENTCTL_WAIT_MS), says so, and gives up with BUS_UNAVAILABLE when none comes; 0 gives up at once", async () => {
    const waited = await submit(1_500);
    expect(waited.code).not.toBe(0);
    expect(waited.stderr).toMatch(/no supervisor answers yet: waiting up to 1500 ms/);
    const last = lastError(waited.stderr);
    expect(last.code).toBe("BUS_UNAVAILABLE");
    // Measured by agentctl itself: a process's start, seconds on a loaded host, is not in it.
    const [, asks, ms] = /\(asked (\d+) times over (\d+) ms\)$/.exec(last.message) ?? [];
    expect(Number(asks)).toBeGreaterThanOrEqual(2);
    expect(Number(ms)).toBeGreaterThanOrEqual(1_500);
    expect(Number(ms)).toBeLessThan(1_500 + 5_000);
    const atOnce = await submit(0);
    expect(atOnce.code).not.toBe(0);
    expect(atOnce.stderr).not.toMatch(/waiting up to/);
    expect(lastError(atOnce.stderr)).toMatchObject({
      code: "BUS_UNAVAILABLE",
      message: expect.stringMatching(/^nobody is serving '[^']+'$/) as string,
    });
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
    const last = lastError(waited.stderr);
    expect(last.code).toBe("BUS_UNAVAILABLE");
    // Tried once a second: a first try, then at 1 s and 1.5 s.
    const [, tries, ms] = /; (\d+) tries over (\d+) ms\)$/.exec(last.message) ?? [];
    expect(Number(tries)).toBeGreaterThanOrEqual(2);
    expect(Number(ms)).toBeGreaterThanOrEqual(1_500);
    expect(Number(ms)).toBeLessThan(1_500 + 5_000);
    const atOnce = await submit(0, gone.url);
    expect(atOnce.stderr).not.toMatch(/waiting up to/);
    expect(lastError(atOnce.stderr).message).toMatch(/; 1 try over \d+ ms\)$/);
  }, 30_000);
});
