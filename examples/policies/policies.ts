import type { ConvergencePolicy } from "../../shared/loop/policy.js";

/**
 * Convergence policies an operator registers in the agent workers, which a RunSpec then names
 * (`policy: "signalQuorum"`). Each is a pure function of what the runtime shows it (the step, the
 * tool calls, the output, the tools' progress signals, the verifiers' results, the critic's
 * verdict): a run is replayed from its log through it. The runtime-invariant scenarios (seed 004)
 * run on the cluster under these.
 */

/** Converges once the run's tools have emitted two distinct progress signals, whatever their names. */
export const signalQuorum: ConvergencePolicy = {
  name: "signalQuorum",
  evaluate: (view) => {
    const distinct = new Set(view.signals.map((s) => s.name)).size;
    return distinct >= 2
      ? { converged: true, reason: `${distinct} distinct progress signals seen` }
      : { converged: false, reason: `${distinct} distinct progress signal(s) seen, 2 needed` };
  },
};

/** Converges once the model has answered twice: a fixed effort, whatever it says. */
export const twoSteps: ConvergencePolicy = {
  name: "twoSteps",
  evaluate: (view) =>
    view.step >= 2
      ? { converged: true, reason: `the model answered ${view.step} times` }
      : { converged: false, reason: `the model answered ${view.step} time(s), 2 needed` },
};

/** Converges before anything is done: the run commits what it has (nothing) at once. */
export const immediately: ConvergencePolicy = {
  name: "immediately",
  evaluate: () => ({ converged: true, reason: "converges at once" }),
};

export const policies: ConvergencePolicy[] = [signalQuorum, twoSteps, immediately];
