/** `steerbot/testing`'s `line`: the fake of the LINE Messaging API. */
export {
  type FakeLine,
  type FakeLineOptions,
  LINE_ALICE,
  LINE_GROUP,
  LINE_TEST,
  type LineCall,
  type LineFailure,
  type LineSentMessage,
  type LineTextEventOptions,
  lineDelivery,
  lineTextEvent,
  postLineDelivery,
  signLineDelivery,
  startFakeLine,
  webhookEventId,
} from '../fakes/line-server.js';
