import type { AgentManifest } from "../contracts/run-spec.js";
import type { ToolDescriptor } from "../contracts/tool.js";
import { describeTool, type AnyTool } from "./tool.js";

/**
 * All tools this process knows. An agent sees only the tools its manifest names; a name the
 * registry does not know is simply absent from the view (calling it yields UNKNOWN_TOOL).
 */
export class ToolRegistry {
  private readonly tools = new Map<string, AnyTool>();

  constructor(tools: readonly AnyTool[] = []) {
    for (const tool of tools) this.register(tool);
  }

  register(tool: AnyTool): this {
    if (this.tools.has(tool.name)) throw new Error(`tool '${tool.name}' is already registered`);
    this.tools.set(tool.name, tool);
    return this;
  }

  get(name: string): AnyTool | undefined {
    return this.tools.get(name);
  }

  names(): string[] {
    return [...this.tools.keys()].sort();
  }

  /** The tools an agent may see, in the manifest's order. */
  visibleTo(manifest: Pick<AgentManifest, "tools">): AnyTool[] {
    return manifest.tools.flatMap((name) => {
      const tool = this.tools.get(name);
      return tool ? [tool] : [];
    });
  }

  descriptors(manifest?: Pick<AgentManifest, "tools">): ToolDescriptor[] {
    const tools = manifest ? this.visibleTo(manifest) : [...this.tools.values()];
    return tools.map((tool) => describeTool(tool));
  }
}
