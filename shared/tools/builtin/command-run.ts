import { spawn } from "node:child_process";
import type { Readable } from "node:stream";

/** One program to run: argv only, never through a shell. */
export interface CommandRun {
  /** The executable's real path. */
  file: string;
  /** argv[0] as the caller named the program (multi-call binaries read it). */
  argv0: string;
  args: readonly string[];
  cwd: string;
  env: Record<string, string>;
  /** Whom it runs as; absent: as this process. */
  identity?: { uid: number; gid: number };
  timeoutMs: number;
  /** The most kept of stdout, and of stderr; the rest is read and dropped. */
  maxOutputBytes: number;
  signal: AbortSignal;
}

export interface CommandResult {
  exitCode: number | null;
  /** The signal that ended it, when one did. */
  killedBy: string | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  truncated: boolean;
}

interface Capped {
  chunks: Buffer[];
  kept: number;
  truncated: boolean;
}

function capture(stream: Readable | null, max: number): Capped {
  const out: Capped = { chunks: [], kept: 0, truncated: false };
  stream?.on("data", (chunk: Buffer) => {
    const room = max - out.kept;
    if (chunk.length > room) out.truncated = true;
    if (room <= 0) return;
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    out.chunks.push(part);
    out.kept += part.length;
  });
  return out;
}

/** SIGKILL to the whole process group: what the program started in the background goes too. */
function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // Gone already (ESRCH).
  }
}

/**
 * Runs a program in a process group of its own, with the given environment only, and ends the
 * group when it exits, when the timeout passes or when the call is aborted, so nothing it started
 * outlives the call. Rejects only when the program could not be started.
 */
export function runCommand(run: CommandRun): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const timeout = AbortSignal.timeout(run.timeoutMs);
    const child = spawn(run.file, [...run.args], {
      argv0: run.argv0,
      cwd: run.cwd,
      env: run.env,
      shell: false,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      ...(run.identity ? { uid: run.identity.uid, gid: run.identity.gid } : {}),
    });
    const stdout = capture(child.stdout, run.maxOutputBytes);
    const stderr = capture(child.stderr, run.maxOutputBytes);
    let timedOut = false;
    const stop = (): void => {
      timedOut ||= timeout.aborted;
      killGroup(child.pid);
    };
    const stopping = AbortSignal.any([timeout, run.signal]);
    stopping.addEventListener("abort", stop, { once: true });
    if (stopping.aborted) stop();
    child.on("exit", () => killGroup(child.pid));
    child.on("error", (err) => {
      stopping.removeEventListener("abort", stop);
      killGroup(child.pid);
      reject(err);
    });
    child.on("close", (code, signal) => {
      stopping.removeEventListener("abort", stop);
      resolve({
        exitCode: code,
        killedBy: signal,
        timedOut,
        stdout: Buffer.concat(stdout.chunks).toString("utf8"),
        stderr: Buffer.concat(stderr.chunks).toString("utf8"),
        truncated: stdout.truncated || stderr.truncated,
      });
    });
  });
}
