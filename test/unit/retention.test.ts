import { describe, expect, it } from "vitest";
import { MAX_PUT_BACK_MS, putBackFor } from "../../services/supervisor/retention.js";
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
  it("refuses an audit trail kept no longer than the statuses: a removed run's id would be free to start again", () => {
    const parse = (env: Record<string, string>) => parseEnv(SupervisorEnv, env);
    expect(parse({ SUPERVISOR_STATUS_RETAIN_MS: "1000" })).toMatchObject({
      SUPERVISOR_STATUS_RETAIN_MS: 1_000,
    });
    expect(parse({ SUPERVISOR_STATUS_RETAIN_MS: "1000", SUPERVISOR_AUDIT_MAX_AGE_MS: "0" })).toBeDefined();
    expect(parse({ SUPERVISOR_STATUS_RETAIN_MS: "1000", SUPERVISOR_AUDIT_MAX_AGE_MS: "1001" })).toBeDefined();
    expect(() => parse({ SUPERVISOR_STATUS_RETAIN_MS: "1000", SUPERVISOR_AUDIT_MAX_AGE_MS: "1000" })).toThrow(
      /SUPERVISOR_AUDIT_MAX_AGE_MS: must be longer than SUPERVISOR_STATUS_RETAIN_MS/,
    );
    expect(parse({ SUPERVISOR_AUDIT_MAX_AGE_MS: "1000" })).toMatchObject({ SUPERVISOR_STATUS_RETAIN_MS: 0 });
  });
});
