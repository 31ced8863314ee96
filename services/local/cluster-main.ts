/**
 * `npm run cluster`: a whole local cluster (supervisor, two agents, critic, tool services) as
 * separate processes, on NATS_URL or a local nats-server, until Ctrl-C.
 */
import { toAgentError } from "../../shared/runtime/errors.js";
import { bootCluster } from "./boot.js";
import { NATS_USERS } from "./cluster.js";

const say = (line: string): void => void process.stdout.write(`${line}\n`);
try {
  const booted = await bootCluster(say);
  const creds = booted.nats.useConfUsers
    ? `NATS_USER=${NATS_USERS.cli.user} NATS_PASSWORD=${NATS_USERS.cli.password} `
    : "";
  say(
    `\ncluster running. In another shell:\n  NATS_URL=${booted.nats.url} ${creds}npm run agentctl -- submit examples/hello.json --watch`,
  );
  say("Ctrl-C stops everything.");
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    say("\nstopping the cluster…");
    booted.stop().then(
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
