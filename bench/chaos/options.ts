/**
 * The soak's flags. A bad flag (unknown, missing its value, out of range) is one structured error
 * on stderr, `{"error":{"code":"INVALID_INPUT","message":…}}`, and exit code 2, as an actor's.
 */
import { Command, CommanderError, InvalidArgumentError } from "commander";

export interface ChaosOptions {
  runs: number;
  workers: number;
  concurrency: number;
  seed: number;
  killEveryMs: number;
  maxKills: number;
  turnMs: number;
  bookMs: number;
  approvals: number;
  natsRestart: number | false;
  natsDownMs: number;
  supervisorRoll: number | false;
  maxStallMs: number;
  maxResumeMs: number;
  deadlineMs: number;
  runTimeoutMs: number;
  keepLogs: boolean;
}

const integer =
  (min: number, max: number) =>
  (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`an integer from ${min} to ${max} was expected, got '${value}'`);
    }
    return n;
  };

function share(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 1)
    throw new InvalidArgumentError(`a share from 0 to 1 was expected, got '${value}'`);
  return n;
}

export function parseOptions(argv: readonly string[]): ChaosOptions {
  const program = new Command("chaos")
    .description(
      "A chaos soak: drives runs through a local cluster of processes while it kills workers, restarts the nats-server and rolls the supervisor, then checks every run",
    )
    .option("--runs <n>", "runs to drive", integer(1, 100_000), 1_000)
    .option("--workers <n>", "agent workers at any time", integer(2, 32), 4)
    .option("--concurrency <n>", "runs in flight at once", integer(1, 1_000), 16)
    .option("--seed <n>", "seed of the run mix and the faults", integer(0, 2 ** 31), 1)
    .option(
      "--kill-every-ms <ms>",
      "a worker killed with SIGKILL every this long, ± half (0: none)",
      integer(0, 3_600_000),
      3_000,
    )
    .option("--max-kills <n>", "workers killed at most", integer(0, 100_000), 100_000)
    .option("--turn-ms <ms>", "the scripted model's latency per turn", integer(0, 60_000), 50)
    .option("--book-ms <ms>", "how long a booking takes", integer(0, 60_000), 100)
    .option(
      "--approvals <n>",
      "runs waiting for a human, approved and rejected in turn",
      integer(0, 1_000),
      2,
    )
    .option(
      "--nats-restart <share>",
      "restart the nats-server once this share of the runs has finished",
      share,
      0.33,
    )
    .option("--no-nats-restart", "never restart the nats-server")
    .option("--nats-down-ms <ms>", "how long the nats-server stays down", integer(0, 60_000), 1_000)
    .option(
      "--supervisor-roll <share>",
      "roll the supervisor once this share of the runs has finished",
      share,
      0.66,
    )
    .option("--no-supervisor-roll", "never roll the supervisor")
    .option(
      "--max-stall-ms <ms>",
      "longest a run tree may record nothing (a human's wait excepted)",
      integer(1, 3_600_000),
      15_000,
    )
    .option(
      "--max-resume-ms <ms>",
      "longest from a fault to the take-over of a run it interrupted",
      integer(1, 3_600_000),
      10_000,
    )
    .option(
      "--deadline-ms <ms>",
      "the whole soak's deadline: runs not finished by then fail it",
      integer(10_000, 86_400_000),
      1_800_000,
    )
    .option(
      "--run-timeout-ms <ms>",
      "a run not settled this long after its submit fails the soak",
      integer(1_000, 86_400_000),
      120_000,
    )
    .option("--keep-logs", "keep the actors' logs even when every check passes", false)
    .exitOverride()
    .configureOutput({ writeErr: () => undefined });
  try {
    program.parse(argv, { from: "user" });
  } catch (err) {
    if (
      err instanceof CommanderError &&
      (err.code === "commander.helpDisplayed" || err.code === "commander.version")
    ) {
      process.exit(0);
    }
    const message = err instanceof Error ? err.message.replace(/^error: /, "") : String(err);
    process.stderr.write(`${JSON.stringify({ error: { code: "INVALID_INPUT", message } })}\n`);
    process.exit(2);
  }
  return program.opts<ChaosOptions>();
}
