import { createHash } from "node:crypto";
import { headers, type Msg, type MsgHdrs } from "@nats-io/transport-node";
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type SpanContext,
} from "@opentelemetry/api";
import { activeTracing, inSpan } from "../runtime/tracing.js";

/**
 * A run's place in its trace, derived from its ids alone: every run of a tree shares the trace of
 * its root run, and each run's span has an id of its own that its parent's span is known by. Any
 * actor computes it without reading anything, so a run taken over by another worker, a decision
 * queued days later and a child admitted by the supervisor all land in the same trace.
 */
export interface RunSpanIds {
  traceId: string;
  spanId: string;
  /** The parent run's span (a child run's); absent for a tree's root run. */
  parentSpanId?: string;
}

/** A run's trace and span ids under a cluster's prefix (see RunSpanIds). */
export function runSpanIds(
  prefix: string,
  run: { runId: string; rootRunId: string; parentRunId?: string },
): RunSpanIds {
  const traceId = digest(`${prefix}/trace/${run.rootRunId}`).slice(0, 32);
  const spanId = runSpanId(prefix, run.runId);
  return run.parentRunId === undefined
    ? { traceId, spanId }
    : { traceId, spanId, parentSpanId: runSpanId(prefix, run.parentRunId) };
}

function runSpanId(prefix: string, runId: string): string {
  return digest(`${prefix}/run/${runId}`).slice(0, 16);
}

function digest(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** A span known by its ids only (made, or to be made, by another process) as a parent context. */
export function remoteParent(traceId: string, spanId: string): Context {
  const parent: SpanContext = { traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true };
  return trace.setSpanContext(ROOT_CONTEXT, parent);
}

/** A run's span as the parent of what is done for it (the context its jobs carry). */
export function runContext(prefix: string, run: Parameters<typeof runSpanIds>[1]): Context {
  const ids = runSpanIds(prefix, run);
  return remoteParent(ids.traceId, ids.spanId);
}

const setter = { set: (carrier: MsgHdrs, key: string, value: string) => carrier.set(key, value) };
const getter = {
  get: (carrier: MsgHdrs | undefined, key: string) => carrier?.get(key) || undefined,
  keys: (carrier: MsgHdrs | undefined) => (carrier ? carrier.keys() : []),
};

/** NATS headers carrying `ctx` (`traceparent`), or undefined while tracing is off. */
export function traceHeaders(ctx: Context = context.active()): MsgHdrs | undefined {
  if (!activeTracing()) return undefined;
  const carrier = headers();
  propagation.inject(ctx, carrier, setter);
  return carrier.has("traceparent") ? carrier : undefined;
}

/** The headers a run's job goes out with: the run's span as its `traceparent` (undefined while off). */
export function jobTraceHeaders(prefix: string, run: Parameters<typeof runSpanIds>[1]): MsgHdrs | undefined {
  if (!activeTracing()) return undefined;
  return traceHeaders(runContext(prefix, run));
}

/** The context a message's `traceparent` names; undefined when it names none. */
export function contextOf(hdrs: MsgHdrs | undefined): Context | undefined {
  if (!hdrs?.has("traceparent")) return undefined;
  const ctx = propagation.extract(ROOT_CONTEXT, hdrs, getter);
  return trace.getSpanContext(ctx) ? ctx : undefined;
}

/**
 * Serves a request inside a SERVER span, child of the span its `traceparent` names (a tool's or
 * critic's caller in another process), with what `describe` says of the answer; just `serve()`
 * while tracing is off.
 */
export function servedInSpan<T>(
  name: string,
  msg: Pick<Msg, "headers">,
  attributes: Attributes,
  serve: () => Promise<T>,
  describe?: (answer: T) => Attributes,
): Promise<T> {
  const tracing = activeTracing();
  if (!tracing) return serve();
  const parent = contextOf(msg.headers) ?? ROOT_CONTEXT;
  return inSpan(tracing, name, { kind: SpanKind.SERVER, attributes, parent }, async (span) => {
    const answer = await serve();
    if (describe) span.setAttributes(describe(answer));
    return answer;
  });
}
