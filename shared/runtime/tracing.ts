import {
  context,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
  type SpanOptions,
  type Tracer,
} from "@opentelemetry/api";

/** A span's ids chosen by the caller: a run's span, which others name as their parent before it exists. */
export interface SpanIds {
  /** Only for a span with no parent: the trace's id. */
  traceId?: string;
  spanId: string;
}

/** What an actor traces with once tracing is on (see startTracing); nothing exists while it is off. */
export interface Tracing {
  tracer: Tracer;
  /** Starts a span with the ids given rather than random ones. */
  startWithIds(name: string, options: SpanOptions, parent: Context, ids: SpanIds): Span;
}

let active: Tracing | undefined;

/** Installs (or, with undefined, removes) the process's tracing: startTracing's, or a test's. */
export function useTracing(tracing: Tracing | undefined): void {
  active = tracing;
}

/**
 * The process's tracing, undefined while it is off: callers test it first, so that a process
 * without traces makes no span, context or header at all on its hot path.
 */
export function activeTracing(): Tracing | undefined {
  return active;
}

/**
 * Runs `fn` inside a span that is the active context for everything it awaits (a request made
 * inside carries it in its headers); the span ends with `fn`, as an error when `fn` throws.
 */
export async function inSpan<T>(
  tracing: Tracing,
  name: string,
  options: SpanOptions & { parent?: Context },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const { parent, ...spanOptions } = options;
  const span = tracing.tracer.startSpan(name, spanOptions, parent ?? context.active());
  try {
    return await context.with(trace.setSpan(parent ?? context.active(), span), () => fn(span));
  } catch (err) {
    failed(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** Marks a span failed, with the error's code when it has one. */
export function failed(span: Span, err: unknown, message?: string): void {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === "string") span.setAttribute("error.type", code);
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: message ?? (err instanceof Error ? err.message : String(err)),
  });
}
