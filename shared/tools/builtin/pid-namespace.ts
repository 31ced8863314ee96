import { spawn } from "node:child_process";
import { findExecutable } from "./command-grant.js";

/**
 * A command in a PID namespace of its own, for a tools actor running as root: the command is the
 * namespace's first process, so everything it starts (a `setsid`, a daemon) dies when it exits or
 * is killed, and each link of the chain dies with its parent, so a tools actor killed outright
 * (SIGKILL) leaves nothing running. util-linux's `unshare` makes the namespace (it needs root);
 * `setpriv` then switches to the command's user. A process's parent-death signal is cleared when
 * its user changes, so the inner `setpriv` sets it again after switching.
 */

/** util-linux's programs, by real path. */
export interface PidNamespace {
  unshare: string;
  setpriv: string;
}

/** The program and arguments that run `path` (argv0: `path`) as `identity` in a namespace of its own. Pure. */
export function inPidNamespace(
  ns: PidNamespace,
  identity: { uid: number; gid: number },
  path: string,
  args: readonly string[],
): { file: string; args: string[] } {
  const dieWithParent = ["--pdeathsig", "KILL"];
  return {
    file: ns.setpriv,
    args: [
      ...dieWithParent,
      "--",
      ns.unshare,
      "--pid",
      "--fork",
      "--kill-child",
      "--",
      ns.setpriv,
      `--reuid=${identity.uid}`,
      `--regid=${identity.gid}`,
      "--clear-groups",
      ...dieWithParent,
      "--",
      path,
      ...args,
    ],
  };
}

/**
 * util-linux's `unshare` and `setpriv` when a namespace can be made here, or why not: a missing
 * program, or a kernel or container that refuses (no CAP_SYS_ADMIN). Tried once, at start.
 */
export async function probePidNamespace(identity: {
  uid: number;
  gid: number;
}): Promise<PidNamespace | { unavailable: string }> {
  const [unshare, setpriv, tru] = await Promise.all(
    ["unshare", "setpriv", "true"].map((name) => findExecutable(name)),
  );
  if (!unshare || !setpriv || !tru)
    return { unavailable: "util-linux's unshare and setpriv are not both installed" };
  const ns = { unshare: unshare.real, setpriv: setpriv.real };
  const run = inPidNamespace(ns, identity, tru.path, []);
  const outcome = await new Promise<string | undefined>((resolve) => {
    const child = spawn(run.file, run.args, { stdio: ["ignore", "ignore", "pipe"], env: {} });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    child.on("error", (err) => resolve(err.message));
    child.on("close", (code) => resolve(code === 0 ? undefined : stderr.trim() || `exit code ${code}`));
  });
  return outcome === undefined ? ns : { unavailable: `unshare --pid failed here: ${outcome}` };
}
