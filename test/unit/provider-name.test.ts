import { describe, expect, it } from "vitest";
import { AnthropicDriver } from "../../shared/models/anthropic.js";
import { OpenAiDriver } from "../../shared/models/openai.js";
import { InstantClock } from "../../shared/runtime/clock.js";
import { seededRandom } from "../../shared/runtime/random.js";

const http = () => ({ clock: new InstantClock(0), random: seededRandom(1) });

describe("a driver's provider (what its breaker is kept for)", () => {
  it("is the model and endpoint, and the key variable when a spec names one other than the default", () => {
    const openai = (apiKeyEnv?: string) =>
      new OpenAiDriver({
        ref: {
          provider: "openai",
          model: "m",
          baseUrl: "https://llm.example/v1/",
          ...(apiKeyEnv ? { apiKeyEnv } : {}),
        },
        env: {},
        prices: {},
        http: http(),
      }).provider;
    expect(openai()).toBe("openai:m@https://llm.example/v1");
    expect(openai("OPENAI_API_KEY")).toBe("openai:m@https://llm.example/v1");
    expect(openai("TEAM_A_KEY")).toBe("openai:m@https://llm.example/v1;key=TEAM_A_KEY");
    expect(openai("TEAM_B_KEY")).not.toBe(openai("TEAM_A_KEY"));
    const anthropic = (apiKeyEnv?: string) =>
      new AnthropicDriver({
        ref: { provider: "anthropic", model: "c", ...(apiKeyEnv ? { apiKeyEnv } : {}) },
        env: {},
        prices: {},
        http: http(),
      }).provider;
    expect(anthropic()).toBe("anthropic:c@https://api.anthropic.com");
    expect(anthropic("ANTHROPIC_API_KEY")).toBe(anthropic());
    expect(anthropic("TEAM_A_KEY")).toBe("anthropic:c@https://api.anthropic.com;key=TEAM_A_KEY");
  });
});
