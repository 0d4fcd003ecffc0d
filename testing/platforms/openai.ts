/** `steerbot/testing`'s `openai`: the fake of OpenAI-compatible chat completions, images and speech. */
export type { FakeOpenAIOptions } from '../fakes/openai-server.js';
export { type FakeOpenAIServer, type FakeRequest, type FakeTurn, startFakeOpenAI } from '../fakes/openai-server.js';
