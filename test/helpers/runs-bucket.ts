import type { ActorBus } from "../../shared/bus/actor.js";

type KeyOp = (key: string, ...rest: unknown[]) => Promise<unknown>;

/**
 * `bus` with its runs bucket's `methods` (each called with a key first) passed through `around`: a
 * test's fault or stall between a component and the real bucket. Every other method is the
 * bucket's own.
 */
export function aroundRunsBucket(
  bus: ActorBus,
  methods: string[],
  around: (key: string, call: () => Promise<unknown>) => Promise<unknown>,
): ActorBus {
  const runs = new Proxy(bus.buckets.runs, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      const op = (value as KeyOp).bind(target);
      if (typeof prop !== "string" || !methods.includes(prop)) return op;
      return (key: string, ...rest: unknown[]) => around(key, () => op(key, ...rest));
    },
  });
  return { ...bus, buckets: { ...bus.buckets, runs } };
}
