import { z } from "zod";

/**
 * What an agent is granted. Parameterless kinds may be written as a bare string ("rag");
 * lists accept "*" as a wildcard.
 */
const Patterns = z.array(z.string().min(1)).min(1);

export const CapabilityObject = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("rag") }),
  z.object({ kind: z.literal("memory") }),
  z.object({ kind: z.literal("compute") }),
  z.object({ kind: z.literal("inference") }),
  z.object({ kind: z.literal("shell"), allowedCommands: Patterns }),
  z.object({ kind: z.literal("network"), allowedHosts: Patterns }),
  z.object({ kind: z.literal("fileRead"), allowedPaths: Patterns }),
  z.object({ kind: z.literal("fileWrite"), allowedPaths: Patterns }),
  z.object({ kind: z.literal("spawn"), maxDepth: z.number().int().nonnegative() }),
  z.object({
    kind: z.literal("mcp"),
    server: z.string().min(1),
    tool: z.string().min(1),
    /**
     * The paths the tool's path arguments may name (as the MCP bridge's configuration declares
     * them), checked by the bridge before the server sees the call; absent: no path at all.
     */
    allowedPaths: Patterns.optional(),
  }),
]);
export type CapabilityObject = z.infer<typeof CapabilityObject>;

export const SIMPLE_CAPABILITY_KINDS = ["rag", "memory", "compute", "inference"] as const;

export const Capability = z.union([
  z.enum(SIMPLE_CAPABILITY_KINDS).transform((kind): CapabilityObject => ({ kind })),
  CapabilityObject,
]);
export type Capability = CapabilityObject;
export type CapabilityKind = CapabilityObject["kind"];

/** What a tool needs: a kind, and for MCP tools the server/tool pair it speaks to. */
export const RequiredCapability = z.object({
  kind: z.enum([
    "rag",
    "memory",
    "compute",
    "inference",
    "shell",
    "network",
    "fileRead",
    "fileWrite",
    "spawn",
    "mcp",
  ]),
  server: z.string().optional(),
  tool: z.string().optional(),
});
export type RequiredCapability = z.infer<typeof RequiredCapability>;

export const PrivacyTier = z.enum(["sovereign", "private", "standard"]);
export type PrivacyTier = z.infer<typeof PrivacyTier>;
export const DEFAULT_PRIVACY: PrivacyTier = "sovereign";
