/** `steerbot/testing`'s `webhook`: the fake of a webhook callback receiver. */
export { type CallbackServer, type ReceivedCallback, startCallbackServer } from '../fakes/webhook-callback-server.js';
