import { Writable } from "node:stream";
import { Command, CommanderError, InvalidArgumentError } from "commander";
import { afterEach, describe, expect, it } from "vitest";
import { jsonErrors, reportCliError, type ErrorStream } from "../../shared/runtime/cli-errors.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { exitOnFatal } from "../../shared/runtime/fatal.js";
import { instanceName } from "../../shared/runtime/instance.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";

/**
 * What a command printed on an stderr that is a pipe (or, `tty`, a terminal), and the exit code it
 * set, the process's own left as it was.
 */
function reported(
  run: (stderr: ErrorStream) => void,
  tty = false,
): { stderr: string; exitCode: typeof process.exitCode } {
  const before = process.exitCode;
  let stderr = "";
  const stream: ErrorStream = { isTTY: tty, write: (text) => (stderr += text) };
  try {
    run(stream);
    return { stderr, exitCode: process.exitCode };
  } finally {
    process.exitCode = before;
  }
}

/** A logger whose JSON lines land in `lines`. */
function capturingLogger(actor: string): {
  logger: ReturnType<typeof createLogger>;
  lines: Record<string, unknown>[];
} {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean))
        lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ actor, destination }), lines };
}

describe("a command-line tool's failure", () => {
  it("is one JSON line with a stable code and exit code 2; a bad flag is INVALID_INPUT without commander's own prefix", () => {
    const program = jsonErrors(new Command("tool")).option("--limit <n>", "how many", (value) => {
      throw new InvalidArgumentError(`expected a number, got '${value}'`);
    });
    let thrown: unknown;
    try {
      program.parse(["--limit", "x"], { from: "user" });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(CommanderError);
    const { stderr, exitCode } = reported((stderr) => reportCliError(thrown, undefined, stderr));
    expect(exitCode).toBe(2);
    expect(stderr.endsWith("\n")).toBe(true);
    expect(stderr.trim().split("\n")).toHaveLength(1);
    const { error } = JSON.parse(stderr) as { error: { code: string; message: string } };
    expect(error.code).toBe("INVALID_INPUT");
    expect(error.message).toBe("option '--limit <n>' argument 'x' is invalid. expected a number, got 'x'");
  });

  it("keeps an AgentError's code, gives anything else the fallback, and treats --help (exit code 0) as no failure", () => {
    const notFound = reported((stderr) =>
      reportCliError(new AgentError("NOT_FOUND", "no run 'r1'"), undefined, stderr),
    );
    expect(JSON.parse(notFound.stderr)).toEqual({ error: { code: "NOT_FOUND", message: "no run 'r1'" } });
    const other = reported((stderr) => reportCliError(new Error("socket closed"), "BUS_UNAVAILABLE", stderr));
    expect(JSON.parse(other.stderr)).toMatchObject({ error: { code: "BUS_UNAVAILABLE" } });
    expect(other.exitCode).toBe(2);
    const help = reported((stderr) =>
      reportCliError(new CommanderError(0, "commander.helpDisplayed", "(outputHelp)"), undefined, stderr),
    );
    expect(help).toEqual({ stderr: "", exitCode: process.exitCode });
    // The help commander shows for a command left out (its exit code 1) is no failure either.
    const left = reported((stderr) =>
      reportCliError(new CommanderError(1, "commander.help", "(outputHelp)"), undefined, stderr),
    );
    expect(left).toEqual({ stderr: "", exitCode: process.exitCode });
  });

  it("on a terminal, reads as lines: the code, then the message's lines indented; piped, stays one JSON line", () => {
    const invalid = new AgentError(
      "INVALID_SPEC",
      "invalid RunSpec:\n✖ Invalid input: expected string\n  → at task.prompt",
    );
    const tty = reported((stderr) => reportCliError(invalid, undefined, stderr), true);
    expect(tty).toEqual({
      stderr:
        "error INVALID_SPEC: invalid RunSpec:\n  ✖ Invalid input: expected string\n    → at task.prompt\n",
      exitCode: 2,
    });
    const piped = reported((stderr) => reportCliError(invalid, undefined, stderr));
    expect(piped.stderr.split("\n")).toHaveLength(2);
    expect(JSON.parse(piped.stderr)).toEqual({ error: { code: "INVALID_SPEC", message: invalid.message } });
  });
});

describe("an actor's fatal failure", () => {
  const installed: ((err: unknown) => void)[] = [];
  afterEach(() => {
    for (const listener of installed.splice(0)) process.off("uncaughtException", listener);
  });

  it("is one fatal log line with the error's code, then exit code 1, logged by the actor's own logger once it has one", () => {
    const early = capturingLogger("boot");
    const exits: number[] = [];
    const listeners = process.listenerCount("uncaughtException");
    const fatal = exitOnFatal(early.logger, (code) => exits.push(code));
    installed.push(fatal.fail);
    // An uncaught exception goes the same way: the listener is the same fail.
    expect(process.listenerCount("uncaughtException")).toBe(listeners + 1);
    expect(process.listeners("uncaughtException")).toContain(fatal.fail);

    fatal.fail(new AgentError("BUS_UNAVAILABLE", "no NATS server answers at nats://127.0.0.1:1"));
    expect(exits).toEqual([1]);
    expect(early.lines).toHaveLength(1);
    expect(early.lines[0]).toMatchObject({
      level: 60,
      actor: "boot",
      code: "BUS_UNAVAILABLE",
      msg: "stopping: no NATS server answers at nats://127.0.0.1:1",
    });

    const own = capturingLogger("supervisor");
    fatal.use(own.logger);
    fatal.fail(new Error("something unexpected"));
    expect(exits).toEqual([1, 1]);
    expect(early.lines).toHaveLength(1);
    expect(own.lines[0]).toMatchObject({ level: 60, actor: "supervisor", code: "INTERNAL" });
  });
});

describe("a process's instance name", () => {
  it("is host, pid and 8 hex digits of the random source, at most 200 characters", () => {
    expect(instanceName(seededRandom(7), "pod-a", 42)).toMatch(/^pod-a-42-[0-9a-f]{8}$/);
    expect(instanceName(seededRandom(7), "pod-a", 42)).toBe(instanceName(seededRandom(7), "pod-a", 42));
    expect(instanceName(seededRandom(7), "pod-a", 42)).not.toBe(instanceName(seededRandom(8), "pod-a", 42));
    expect(instanceName({ next: () => 0 }, "h", 1)).toBe("h-1-00000000");
    expect(instanceName({ next: () => 0.999_999_999_9 }, "h", 1)).toBe("h-1-ffffffff");
    expect(instanceName(seededRandom(1), "x".repeat(300), 1)).toHaveLength(200);
  });
});
