import { useClusterSuite, type ClusterSuite } from "./cluster-suite.js";
import { FAST_PRESENCE_ENV } from "./fake-worker.js";

/** Longer than a fault test: every recovery must come from elsewhere than JetStream's redelivery. */
export const FAULT_ACK_WAIT_MS = 120_000;

/**
 * A cluster for tests of faults: a supervisor and three workers at first, on a nats-server of the
 * suite's own, which the faults may restart. Every recovery comes from the workers' presence (a
 * survivor handing a dead worker's jobs back, a newcomer's look for jobs nobody holds) and the
 * actors' reconnection, never from the ack wait.
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
    env: { ...FAST_PRESENCE_ENV, AGENT_ACK_WAIT_MS: String(FAULT_ACK_WAIT_MS), ...env },
  });
}
