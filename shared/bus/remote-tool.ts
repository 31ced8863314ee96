import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { ToolCallReply, ToolCallRequest, ToolDescriptor } from "../contracts/tool.js";
import type { Clock } from "../runtime/clock.js";
import { AgentError, fromErrorPayload } from "../runtime/errors.js";
import type { Logger } from "../runtime/logger.js";
import { outputExtras, type AnyTool } from "../tools/tool.js";
import { requestJson, type ServiceWait } from "./request.js";
import type { Subjects } from "./subjects.js";
import { traceHeaders } from "./trace-context.js";

export interface RemoteToolDeps {
  nc: NatsConnection;
  subjects: Subjects;
  clock: Clock;
}

const DescribeRequest = z.object({});

/**
 * A tool served by another process (in any language) on `<prefix>.tools.<name>`, seen by the
 * worker as an ordinary tool: the invoker's timeout, retries and breaker apply, and the call
 * carries its idempotency key, so the service answers a repeat with the recorded result.
 */
export function remoteTool(descriptor: ToolDescriptor, deps: RemoteToolDeps): AnyTool {
  return {
    name: descriptor.name,
    description: descriptor.description,
    input: z.unknown(),
    inputSchema: descriptor.inputSchema,
    capability: descriptor.capability,
    timeoutMs: descriptor.timeoutMs,
    reversibility: descriptor.reversibility,
    idempotent: descriptor.idempotent,
    ...(descriptor.compensation ? { compensation: descriptor.compensation } : {}),
    ...(descriptor.redact ? { redact: descriptor.redact } : {}),
    execute: async (input, ctx) => {
      const reply = await requestJson(
        deps.nc,
        deps.subjects.tool(descriptor.name),
        {
          schema: ToolCallRequest,
          value: {
            schemaVersion: 1,
            runId: ctx.runId,
            actionId: ctx.actionId,
            idempotencyKey: ctx.idempotencyKey,
            input,
            deadline: deps.clock.now() + descriptor.timeoutMs,
            grant: ctx.granted,
            privacy: ctx.privacy,
            depth: ctx.depth,
            ...(ctx.approval ? { approval: ctx.approval } : {}),
          },
        },
        ToolCallReply,
        {
          timeoutMs: descriptor.timeoutMs,
          unavailable: "TOOL_UNAVAILABLE",
          timeout: "TOOL_TIMEOUT",
          headers: traceHeaders(),
        },
      );
      if (!reply.ok) throw fromErrorPayload(reply.error, "TOOL_FAILED");
      return { output: reply.output, ...outputExtras(reply) };
    },
  };
}

export interface DescribeDeps extends Pick<RemoteToolDeps, "nc" | "subjects"> {
  logger: Logger;
  timeoutMs?: number;
  /** Waits for a service when nobody serves the tool yet; asks once without. */
  wait?: ServiceWait | undefined;
}

/**
 * Asks a tool's service for its descriptor; undefined (and logged) when nobody serves it, or its
 * service answers with something that is not a descriptor. A request that got no answer in time,
 * or lost its reply to a dropped connection, throws its retryable AgentError instead: someone may
 * serve the tool, and a run started as if nobody did fails for good (its plan names a tool it does
 * not have), where a lease retried a moment later finds it (a NATS server restarting, say).
 */
export async function describeRemoteTool(
  name: string,
  deps: DescribeDeps,
): Promise<ToolDescriptor | undefined> {
  try {
    return await requestJson(
      deps.nc,
      deps.subjects.toolDescribe(name),
      { schema: DescribeRequest, value: {} },
      ToolDescriptor,
      // A descriptor is a read: asked again if the connection drops before it comes.
      {
        timeoutMs: deps.timeoutMs ?? 2_000,
        unavailable: "TOOL_UNAVAILABLE",
        timeout: "TOOL_TIMEOUT",
        wait: deps.wait && { ...deps.wait, repeatable: true },
      },
    );
  } catch (err) {
    if (outcomeUnknown(err)) throw err;
    deps.logger.warn(
      { err, tool: name, ...(deps.wait ? { serviceWaitMs: deps.wait.waitMs } : {}) },
      "tool not available: no service described it",
    );
    return undefined;
  }
}

/** Whether a describe failed without learning anything: no answer in time, or no connection. */
function outcomeUnknown(err: unknown): boolean {
  return err instanceof AgentError && (err.code === "TOOL_TIMEOUT" || err.code === "BUS_UNAVAILABLE");
}

/**
 * Asks each named tool service for its descriptor; a tool nobody serves is left out (and logged),
 * one that could not be asked fails the whole call (see describeRemoteTool).
 */
export async function discoverTools(
  names: readonly string[],
  deps: RemoteToolDeps & { logger: Logger; timeoutMs?: number },
): Promise<AnyTool[]> {
  const found = await Promise.all(names.map((name) => describeRemoteTool(name, deps)));
  return found.flatMap((descriptor) => (descriptor ? [remoteTool(descriptor, deps)] : []));
}
