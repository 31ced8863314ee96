import { useClusterSuite, type ClusterSuite } from "./cluster-suite.js";
import { WORKER_ACK_WAIT_MS } from "./fake-worker.js";

/** The ack wait of the fault suites: the product's default, by which a dead worker's jobs move on. */
export const FAULT_ACK_WAIT_MS = WORKER_ACK_WAIT_MS;

/**
 * A cluster for tests of faults: a supervisor and three workers at first, on a nats-server of the
 * suite's own, which the faults may restart. A killed worker's jobs go to another once their ack
 * wait passes; the actors reconnect after a restart.
 */
export function useFaultSuite(name: string, env: Record<string, string>): ClusterSuite {
  return useClusterSuite(name, {
    own: true,
    actors: [
      { kind: "supervisor" },
      { kind: "agent", name: "agent-1" },
      { kind: "agent", name: "agent-2" },
      { kind: "agent", name: "agent-3" },
    ],
    env: { AGENT_ACK_WAIT_MS: String(FAULT_ACK_WAIT_MS), ...env },
  });
}
