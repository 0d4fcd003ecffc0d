/** `steerbot/testing`'s `anthropic`: the fake of Anthropic's Messages API. */
export { type AnthropicTurn, type FakeAnthropicOptions, type FakeAnthropicServer, startFakeAnthropic } from '../fakes/anthropic-server.js';
