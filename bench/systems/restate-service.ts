/**
 * W1 as a Restate service (its own process, as Restate deployments run): one `ctx.run` per step
 * (the scripted model turn and the echo tool), then one for the critic. Returns when each step's
 * journal entry was acknowledged, for step latencies. Prints its port on stdout.
 */
import { createServer } from "node:http2";
import * as restate from "@restatedev/restate-sdk";
import { FINAL_ANSWER, PASSING_VERDICT, STEPS, TOOL_STEPS, echoText } from "../lib/workload.ts";

type Message = { role: "user" | "assistant" | "tool"; text: string; call?: string };

const clock = (): number => performance.timeOrigin + performance.now();

export const benchLoop = restate.service({
  name: "bench",
  handlers: {
    loop: async (ctx: restate.Context, prompt: string): Promise<{ stepEnds: number[]; answer: string }> => {
      const messages: Message[] = [{ role: "user", text: prompt }];
      const stepEnds: number[] = [];
      for (let step = 1; step <= STEPS; step += 1) {
        const turn = await ctx.run(`step-${step}`, () => {
          if (step > TOOL_STEPS) return [{ role: "assistant", text: FINAL_ANSWER }] satisfies Message[];
          const text = echoText(step);
          return [
            { role: "assistant", text: "", call: JSON.stringify({ name: "echo", input: { text } }) },
            { role: "tool", text },
          ] satisfies Message[];
        });
        messages.push(...turn);
        stepEnds.push(clock());
      }
      const verdict = await ctx.run("critic", () => PASSING_VERDICT);
      return { stepEnds, answer: JSON.parse(verdict) ? (messages.at(-1)?.text ?? "") : "" };
    },
  },
});

const server = createServer(restate.endpoint().bind(benchLoop).http2Handler());
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === "object" ? address?.port : 0 })}\n`);
});
