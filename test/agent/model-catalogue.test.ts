/**
 * Model limits: the catalogue of common models fills `model.contextWindow`
 * and `model.outputReserve`; settings override it; an unknown model without a
 * window is left to the runner's discovery on an OpenAI-compatible server
 * (test/runner/context-window.test.ts), and refused at load elsewhere, naming the field.
 */
import { describe, expect, it } from 'vitest';
import { readConfig } from '../../app/config.js';
import { modelLimits } from '../../src/config/model-catalogue.js';
import { configErrorOf } from '../helpers/config-error.js';

const KEY = { OPENAI_API_KEY: 'k' };

describe('modelLimits', () => {
  it('knows common models by name and by dated or aliased release', () => {
    expect(modelLimits('gpt-4o')).toEqual({ contextWindow: 128_000, outputLimit: 16_384 });
    expect(modelLimits('gpt-4o-2024-08-06')).toEqual(modelLimits('gpt-4o'));
    expect(modelLimits('claude-sonnet-4-20250514')).toEqual({ contextWindow: 200_000, outputLimit: 64_000 });
    expect(modelLimits('claude-3-5-haiku-latest')).toEqual({ contextWindow: 200_000, outputLimit: 8_192 });
    expect(modelLimits('models/gemini-2.5-pro')).toEqual({ contextWindow: 1_048_576, outputLimit: 65_536 });
  });

  it('matches the longest known name, never a different model that shares a prefix', () => {
    expect(modelLimits('gpt-4.1-mini-2025-04-14')).toEqual(modelLimits('gpt-4.1-mini'));
    expect(modelLimits('o3-mini-2025-01-31')).toEqual({ contextWindow: 200_000, outputLimit: 100_000 });
    expect(modelLimits('gpt-4o-audio-preview')).toBeUndefined(); // another model, not a release of gpt-4o
    expect(modelLimits('gpt-4o-turbo-custom')).toBeUndefined();
    expect(modelLimits('llama3.1:8b')).toBeUndefined();
  });
});

describe('model settings at start', () => {
  it('take the window and the output limit of a catalogued model', () => {
    expect(readConfig({ env: { ...KEY, STEERBOT_MODEL: 'gpt-4.1' } }).model).toMatchObject({
      name: 'gpt-4.1',
      contextWindow: 1_047_576,
      outputReserve: 32_768,
    });
  });

  it('let settings override the catalogue; a smaller window caps the catalogued reserve at a quarter of it', () => {
    expect(readConfig({ env: { ...KEY, STEERBOT_MODEL: 'gpt-4o', STEERBOT_MODEL_CONTEXT_WINDOW: '32000' } }).model).toMatchObject({
      contextWindow: 32_000,
      outputReserve: 8_000,
    });
    expect(readConfig({ env: { ...KEY, STEERBOT_MODEL: 'gpt-4o', STEERBOT_MODEL_OUTPUT_RESERVE: '2000' } }).model).toMatchObject({
      contextWindow: 128_000,
      outputReserve: 2_000,
    });
  });

  it('refuse an unknown model without a window where no server names one, naming the field, the model and the variable', () => {
    const err = configErrorOf({ STEERBOT_MODEL_PROVIDER: 'anthropic', ANTHROPIC_API_KEY: 'k', STEERBOT_MODEL: 'claude-next' });
    expect(err.issues).toEqual([{ path: 'model.contextWindow', message: expect.stringMatching(/unknown model "claude-next".*STEERBOT_MODEL_CONTEXT_WINDOW/) }]);
    expect(configErrorOf({ ...KEY, STEERBOT_MODEL: 'gpt-next' }).issues.map((i) => i.path)).toEqual(['model.contextWindow']);
  });

  it("leave the window of an unknown model on an OpenAI-compatible server to the runner's discovery at start", () => {
    const env = { STEERBOT_MODEL_PROVIDER: 'openai-compatible', OPENAI_BASE_URL: 'http://localhost:11434/v1', STEERBOT_MODEL: 'llama3.1:8b' };
    expect(readConfig({ env }).model).toMatchObject({ name: 'llama3.1:8b', discoverWindow: true, outputReserve: 4096 });
  });

  it('accept an unknown model with a window, keeping 4096 tokens for the answer', () => {
    const env = {
      STEERBOT_MODEL_PROVIDER: 'openai-compatible',
      OPENAI_BASE_URL: 'http://localhost:11434/v1',
      STEERBOT_MODEL: 'llama3.1:8b',
      STEERBOT_MODEL_CONTEXT_WINDOW: '8192',
    };
    expect(readConfig({ env }).model).toMatchObject({ contextWindow: 8192, outputReserve: 4096 });
  });

  it('refuse a reserve that leaves no room for the prompt', () => {
    expect(configErrorOf({ ...KEY, STEERBOT_MODEL: 'gpt-4o', STEERBOT_MODEL_OUTPUT_RESERVE: '200000' }).issues.map((i) => i.path)).toEqual([
      'model.outputReserve',
    ]);
  });
});
