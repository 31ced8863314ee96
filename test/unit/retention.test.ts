import { describe, expect, it } from "vitest";
import { MAX_PUT_BACK_MS, logOutlivesStatuses, putBackFor } from "../../services/supervisor/retention.js";
import { SupervisorEnv } from "../../services/supervisor/env.js";
import { parseEnv } from "../../shared/runtime/config.js";

describe("when a finished run's WAL may go", () => {
  const day = 86_400_000;

  it("waits out what is left of the retention since the run finished; nothing once it has passed", () => {
    expect(putBackFor(1_000, 1_000, 500)).toBe(500);
    expect(putBackFor(1_000, 1_400, 500)).toBe(100);
    expect(putBackFor(1_000, 1_500, 500)).toBe(0);
    expect(putBackFor(1_000, 9_000, 500)).toBe(0);
  });

  it("puts an event back for at most an hour, so a shorter retention set later applies within one", () => {
    expect(putBackFor(0, 0, 7 * day)).toBe(MAX_PUT_BACK_MS);
    expect(MAX_PUT_BACK_MS).toBe(3_600_000);
  });
});

describe("the status retention's configuration", () => {
  it("refuses a run log kept no longer than the statuses: a removed run's id would be free to start again", () => {
    const ms = 1_000_000;
    expect(logOutlivesStatuses(0, 1_000)).toBeUndefined();
    expect(logOutlivesStatuses(1_001 * ms, 1_000)).toBeUndefined();
    expect(logOutlivesStatuses(500 * ms, 0)).toBeUndefined();
    const refused = logOutlivesStatuses(1_000 * ms, 1_000);
    expect(refused?.code).toBe("INVALID_INPUT");
    expect(refused?.message).toMatch(
      /keeps messages 1000 ms .* no longer than SUPERVISOR_STATUS_RETAIN_MS \(1000\)/,
    );
  });

  it("refuses a log max_age JetStream would refuse: shorter than the stream's dedupe window", () => {
    const parse = (ms: string) => parseEnv(SupervisorEnv, { SUPERVISOR_LOG_MAX_AGE_MS: ms });
    expect(() => parse("60000")).toThrow(
      /SUPERVISOR_LOG_MAX_AGE_MS: 0 \(for ever\) or at least .* 120000 ms/,
    );
    expect(parse("0").SUPERVISOR_LOG_MAX_AGE_MS).toBe(0);
    expect(parse("120000").SUPERVISOR_LOG_MAX_AGE_MS).toBe(120_000);
  });
});
