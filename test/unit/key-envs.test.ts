import { describe, expect, it } from "vitest";
import { createDriver } from "../../shared/models/factory.js";
import { DEFAULT_MODEL_KEY_ENVS, keyEnvPatterns, keyEnvRefusal } from "../../shared/models/key-envs.js";
import { InstantClock } from "../../shared/runtime/clock.js";
import { ActorEnv, parseEnv } from "../../shared/runtime/config.js";
import { seededRandom } from "../../shared/runtime/random.js";

const deps = (env: Record<string, string>) => ({
  env,
  prices: {},
  http: { clock: new InstantClock(0), random: seededRandom(1) },
});
const model = (apiKeyEnv?: string) => ({
  provider: "openai" as const,
  model: "m",
  baseUrl: "https://llm.example.com/v1",
  ...(apiKeyEnv ? { apiKeyEnv } : {}),
});

describe("the variables a spec may name as its model's key (MODEL_KEY_ENVS)", () => {
  it("by default, those named like a key: `*_API_KEY`", () => {
    expect(keyEnvPatterns({})).toEqual(DEFAULT_MODEL_KEY_ENVS);
    expect(keyEnvRefusal("OPENAI_API_KEY", DEFAULT_MODEL_KEY_ENVS)).toBeUndefined();
    expect(keyEnvRefusal("TEAM_A_API_KEY", DEFAULT_MODEL_KEY_ENVS)).toBeUndefined();
    for (const name of ["NATS_PASSWORD", "AWS_SECRET_ACCESS_KEY", "API_KEY", "OPENAI_API_KEY_X"]) {
      expect(keyEnvRefusal(name, DEFAULT_MODEL_KEY_ENVS), name).toMatch(
        new RegExp(
          `^apiKeyEnv '${name}' is not a variable this cluster keeps model keys in \\(MODEL_KEY_ENVS: \\*_API_KEY\\)`,
        ),
      );
    }
  });

  it("as the actor's environment lists them, by name or with `*`", () => {
    const patterns = keyEnvPatterns({ MODEL_KEY_ENVS: " CRITIC_TEST_KEY , TEAM_*_KEY" });
    expect(patterns).toEqual(["CRITIC_TEST_KEY", "TEAM_*_KEY"]);
    expect(keyEnvRefusal("CRITIC_TEST_KEY", patterns)).toBeUndefined();
    expect(keyEnvRefusal("TEAM_B_KEY", patterns)).toBeUndefined();
    expect(keyEnvRefusal("OPENAI_API_KEY", patterns)).toBeDefined();
    // A malformed value stops the actor at its start; were it read anyway, it would allow nothing.
    expect(() => parseEnv(ActorEnv, { MODEL_KEY_ENVS: "A_KEY;rm -rf" })).toThrow(/MODEL_KEY_ENVS/);
    expect(keyEnvPatterns({ MODEL_KEY_ENVS: "A.KEY" })).toEqual([]);
  });

  it("a driver naming another variable is not built: its key is never read, nor sent", () => {
    const env = { NATS_PASSWORD: "nats-secret", OPENAI_API_KEY: "sk-1", TEAM_KEY: "sk-2" };
    expect(() => createDriver(model("NATS_PASSWORD"), "standard", deps(env))).toThrow(
      expect.objectContaining({ code: "MODEL_KEY_DENIED", retryable: false }),
    );
    expect(() =>
      createDriver(model("TEAM_KEY"), "standard", deps({ ...env, MODEL_KEY_ENVS: "TEAM_KEY" })),
    ).not.toThrow();
    // The provider's default variable, named or not, is always allowed.
    expect(() =>
      createDriver(model(), "standard", deps({ ...env, MODEL_KEY_ENVS: "TEAM_KEY" })),
    ).not.toThrow();
    expect(() =>
      createDriver(model("OPENAI_API_KEY"), "standard", deps({ ...env, MODEL_KEY_ENVS: "TEAM_KEY" })),
    ).not.toThrow();
  });
});
