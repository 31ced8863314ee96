import type { RepairControl } from "../contracts/run-spec.js";
import { STRATEGY_ORDER, type RepairStrategy } from "./repair.js";

/**
 * A discrete PID controller over the repair loop (seed 003 §2). Its error is how far the judged
 * candidate falls short of the rubric's threshold; its output, an intensity in [0, 1], picks how
 * much of the answer a repair may change. It also watches for a stall: when the best error so far
 * has not dropped by more than the noise floor for `stallWindow` cycles, more of the same repair
 * is spending budget for nothing and the run must escalate. Pure: the state is the loop's.
 */
export interface ControllerState {
  /** Repair cycles measured so far. */
  cycles: number;
  /** Σ e(k): persistent shortfall pushes the intensity up. */
  integral: number;
  /** e(k−1), absent before the first measurement. */
  previous: number | null;
  /** The lowest error measured: improvement is counted against it, not against the last one. */
  best: number | null;
  /** Cycles in a row without an improvement beyond the noise floor. */
  flat: number;
  /** u(k), clamped to [0, 1]. */
  intensity: number;
}

export const INITIAL_CONTROLLER: ControllerState = {
  cycles: 0,
  integral: 0,
  previous: null,
  best: null,
  flat: 0,
  intensity: 0,
};

export interface ControlStep {
  state: ControllerState;
  error: number;
  derivative: number;
  intensity: number;
  strategy: RepairStrategy;
  stalled: boolean;
}

/** Intensity bands: up to a third a minimal edit, up to two thirds a section rewrite, above that a new answer. */
export function strategyFor(intensity: number): RepairStrategy {
  const band = Math.min(STRATEGY_ORDER.length - 1, Math.floor(intensity * STRATEGY_ORDER.length));
  return STRATEGY_ORDER[Math.max(0, band)] as RepairStrategy;
}

/** The stronger of two strategies: the controller may raise what the defects ask for, never lower it. */
export function strongest(a: RepairStrategy, b: RepairStrategy): RepairStrategy {
  return STRATEGY_ORDER.indexOf(b) > STRATEGY_ORDER.indexOf(a) ? b : a;
}

/** One measurement: u(k) = Kp·e(k) + Ki·Σe + Kd·(e(k) − e(k−1)), clamped, and the stall count. */
export function controlStep(gains: RepairControl, state: ControllerState, error: number): ControlStep {
  const e = Math.max(0, error);
  const derivative = state.previous === null ? 0 : e - state.previous;
  const integral = state.integral + e;
  const raw = gains.kp * e + gains.ki * integral + gains.kd * derivative;
  const intensity = Math.min(1, Math.max(0, raw));
  const improved = state.best === null || state.best - e > gains.noiseFloor;
  const flat = improved ? 0 : state.flat + 1;
  const next: ControllerState = {
    cycles: state.cycles + 1,
    integral,
    previous: e,
    best: state.best === null ? e : Math.min(state.best, e),
    flat,
    intensity,
  };
  return {
    state: next,
    error: e,
    derivative,
    intensity,
    strategy: strategyFor(intensity),
    stalled: flat >= gains.stallWindow,
  };
}

/**
 * After an escalation the stall count and the integral start over: the stronger model (or the
 * human's words) get their own window before the next escalation. The best error is kept.
 */
export function afterEscalation(state: ControllerState): ControllerState {
  return { ...state, integral: 0, flat: 0 };
}

/**
 * The error of a judged candidate. With a critic that scored it: the weighted score's distance to
 * the threshold, or the largest per-dimension deficit when that is larger (a dimension below its
 * minimum fails the gates as surely). A candidate the verifiers stopped before the critic counts
 * its verifier pass rate as a share of the threshold (or of 1 without a critic). Undefined when
 * there is nothing to measure (the critic failed, or no verifier and no verdict).
 */
export function repairError(input: {
  threshold: number | undefined;
  weighted: number | undefined;
  maxDeficit: number | undefined;
  verifiers: { passed: number; total: number };
}): number | undefined {
  const { threshold, weighted, maxDeficit, verifiers } = input;
  if (threshold !== undefined && weighted !== undefined)
    return Math.max(0, threshold - weighted, maxDeficit ?? 0);
  if (verifiers.total === 0 || verifiers.passed === verifiers.total) return undefined;
  const setpoint = threshold ?? 1;
  return setpoint * (1 - verifiers.passed / verifiers.total);
}
