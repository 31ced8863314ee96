/**
 * The operator's function, outside the planner's allowlist: the changes the seed reserves for a
 * human. A tick run is never offered it (its spec lists the eight planner functions only), and
 * every change but a small treasury transfer is carried out only with a human's approval.
 */
import { z } from "zod";
import { RiskLimits } from "./config.js";
import { Correlation, FUNCTIONS, Mode, RESPONSES, response } from "./contract.js";

export const CONTROL_FUNCTION = "apply_control_change" as const;

const Symbol = z.string().regex(/^[A-Z0-9-]{1,20}$/);

export const ControlChange = z.discriminatedUnion("kind", [
  /** Enabling or disabling live mode. */
  z.strictObject({ kind: z.literal("mode"), mode: Mode }),
  /** Changing hard risk limits (the ones given; leverage stays at most 1). */
  z.strictObject({
    kind: z.literal("risk_limits"),
    limits: RiskLimits.partial().refine((l) => Object.keys(l).length > 0, "name at least one limit"),
  }),
  /** Moving cash between trading capital and the operating cash that pays the desk's costs. */
  z.strictObject({
    kind: z.literal("treasury_transfer"),
    direction: z.enum(["to_operating", "to_trading"]),
    amount: z.number().finite().positive(),
  }),
  /** Strategy family changes or symbol universe changes. */
  z.strictObject({
    kind: z.literal("strategy"),
    allowed_strategies: z.array(z.string().min(1)).min(1).optional(),
    universe: z.array(Symbol).min(1).optional(),
  }),
  /** Suppressing (or restoring) the critical alert of a stop-trading condition. */
  z.strictObject({ kind: z.literal("alert_override"), alert: z.string().min(1), suppress: z.boolean() }),
]);
export type ControlChange = z.infer<typeof ControlChange>;

export const ApplyControlChangeRequest = Correlation.extend({
  change: ControlChange,
  reason: z.string().min(1),
  requested_by: z.string().min(1),
});
export type ApplyControlChangeRequest = z.infer<typeof ApplyControlChangeRequest>;

export const ApplyControlChangeResponse = response({
  applied: z.boolean(),
  /** Who approved the change (absent when none was needed, or it was refused). */
  approved_by: z.string().nullable(),
});

/** Every function the executor serves: the planner's eight and the operator's control change. */
export const EXECUTOR_FUNCTIONS = { ...FUNCTIONS, [CONTROL_FUNCTION]: ApplyControlChangeRequest } as const;
export type ExecutorFunction = keyof typeof EXECUTOR_FUNCTIONS;
export type ExecutorRequest<F extends ExecutorFunction> = z.infer<(typeof EXECUTOR_FUNCTIONS)[F]>;

export const EXECUTOR_RESPONSES = {
  ...RESPONSES,
  [CONTROL_FUNCTION]: ApplyControlChangeResponse,
} as const satisfies Record<ExecutorFunction, z.ZodType>;
