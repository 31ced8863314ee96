/**
 * `npm run cluster`: a whole local cluster (supervisor, two agents, critic, tool services) as
 * separate processes, on NATS_URL or a local nats-server, until Ctrl-C.
 */
import { toAgentError } from "../../shared/runtime/errors.js";
import { bootCluster } from "./boot.js";
import { NATS_USERS } from "./cluster.js";
import { writeClusterFile } from "./cluster-file.js";

const say = (line: string): void => void process.stdout.write(`${line}\n`);
try {
  // NATS's own port when it is free, so that agentctl's default NATS_URL reaches it from anywhere.
  const booted = await bootCluster(say, { preferPort: 4222, console: { preferPort: 8090 } });
  const login = booted.nats.useConfUsers ? NATS_USERS.cli : undefined;
  // Best effort: a checkout it cannot write to only loses agentctl's finding the cluster by itself.
  const removeFile = await writeClusterFile({
    url: booted.nats.url,
    ...(login ? { user: login.user, password: login.password } : {}),
    pid: process.pid,
  }).catch((err: unknown) => {
    say(`(agentctl will need NATS_URL: could not write .cache/local-cluster.json: ${String(err)})`);
    return () => Promise.resolve();
  });
  const creds = login ? `NATS_USER=${login.user} NATS_PASSWORD=${login.password} ` : "";
  say(
    [
      "",
      "cluster running. In another shell, in this checkout (agentctl finds this cluster):",
      "  npm run agentctl -- submit examples/hello.json --watch",
      "from anywhere else:",
      `  NATS_URL=${booted.nats.url} ${creds}npm run agentctl -- runs`,
      ...(booted.console
        ? [
            `web console: ${booted.console.url}`,
            `  its operate token (approve, halt, resume, the kill switch): ${booted.console.operateToken}`,
          ]
        : []),
    ].join("\n"),
  );
  say("Ctrl-C stops everything.");
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    say("\nstopping the cluster…");
    Promise.all([removeFile(), booted.stop()]).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
} catch (err) {
  const error = toAgentError(err);
  process.stderr.write(`${error.code}: ${error.message}\n`);
  process.exit(1);
}
