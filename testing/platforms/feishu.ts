/** `steerbot/testing`'s `feishu`: the fake of the Feishu / Lark open platform and its long connection. */
export {
  encryptCallback,
  FEISHU_ANN,
  FEISHU_BOB,
  FEISHU_BOT_OPEN_ID,
  FEISHU_DM,
  FEISHU_GROUP,
  FEISHU_TEST,
  type FeishuMessageOptions,
  feishuCardAction,
  feishuId,
  feishuMessageEvent,
  feishuSignedHeaders,
  type PostCallbackOptions,
  postFeishuCallback,
} from '../fakes/feishu-events.js';
export { decodeFrame, encodeFrame, type FeishuFrame } from '../fakes/feishu-frame.js';
export {
  type FakeFeishu,
  type FakeFeishuOptions,
  type FeishuAck,
  type FeishuCall,
  type FeishuFailure,
  type FeishuSentMessage,
  type FeishuUpload,
  startFakeFeishu,
} from '../fakes/feishu-server.js';
