/** `steerbot/testing`'s `google`: the fake of Google's Gemini API. */
export { type FakeGoogleOptions, type FakeGoogleServer, type GoogleTurn, startFakeGoogle } from '../fakes/google-server.js';
