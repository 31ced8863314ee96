/**
 * `npm start`: the quick start. Boots a local cluster (each actor its own process), submits the
 * sample run through the supervisor, shows its progress live, prints the result with its
 * provenance, and shuts everything down.
 */
import { ClusterClient } from "../cli/client.js";
import { auditLine, statusLine } from "../cli/render.js";
import { clientBus, withLocalCluster, type Booted } from "./boot.js";
import { demoSpec } from "./demo-spec.js";

const say = (line: string): void => void process.stdout.write(`${line}\n`);
const started = Date.now();

async function demo(booted: Booted): Promise<boolean> {
  const bus = await clientBus(booted, "npm-start");
  try {
    const client = new ClusterClient(bus);
    const reply = await client.submit(demoSpec);
    say(`\nsubmitted run ${reply.runId} (${reply.status}); progress:`);
    const limits = { maxIterations: 10, maxToolCalls: 10 };
    for await (const status of client.follow(reply.runId)) say(`  ${statusLine(status, limits)}`);
    say("\naudit trail:");
    for (const event of await client.audit(reply.runId)) say(`  ${auditLine(event)}`);
    const final = await client.status.get(reply.runId);
    const terminal = final?.terminal;
    say(`\nresult: ${final?.status ?? "unknown"} — ${terminal?.reason ?? ""}`);
    if (terminal?.output) say(`output: ${terminal.output}`);
    if (terminal?.provenance) say(`provenance: ${JSON.stringify(terminal.provenance, null, 2)}`);
    // This cluster and its store go when the demo ends: the hint points at one that stays up.
    say(
      "\nnext: `npm run cluster` keeps a cluster up and prints, for another shell, the agentctl command that submits and watches a run (`npm run agentctl -- audit tail <runId>` then shows its trail)",
    );
    return final?.status === "committed";
  } finally {
    await bus.nc.drain();
  }
}

say("starting a local cluster…");
const ok = await withLocalCluster(say, {}, (booted) => {
  say(`cluster up in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return demo(booted);
});
const took = `${((Date.now() - started) / 1000).toFixed(1)} s`;
say(ok ? `\ndone in ${took}; everything stopped.` : `\nfailed after ${took}; everything stopped.`);
process.exit(ok ? 0 : 1);
