import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const SOAK = fileURLToPath(new URL("../../bench/chaos/main.ts", import.meta.url));
const run = promisify(execFile);

/** The soak's exit code and output (a failed soak rejects with both). */
async function soak(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(process.execPath, [SOAK, ...args]).then(
    (out) => ({ code: 0, ...out }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
}

describe("npm run chaos: the chaos soak users run", () => {
  it("drives ten runs through a worker killed with SIGKILL, a nats-server restart and a supervisor roll, and every check passes", async () => {
    const { code, stdout, stderr } = await soak(
      ...["--runs", "10", "--max-kills", "1", "--kill-every-ms", "1000", "--deadline-ms", "60000"],
    );
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(
      /^chaos: runs=10 committed=\d+ failed=\d+ wrong=0 .*kills=1 nats_restarts=1 supervisor_rolls=1 duplicates=0 untraced=0 gaps=0 stalls=0 /,
    );
  }, 90_000);

  it("refuses a bad flag with one structured error and exit code 2, starting nothing", async () => {
    const { code, stderr } = await soak("--runs", "many");
    expect(code).toBe(2);
    expect(JSON.parse(stderr)).toMatchObject({
      error: { code: "INVALID_INPUT", message: expect.stringMatching(/--runs/) as unknown },
    });
  });
});
