/**
 * Feishu / Lark events as the platform sends them (v2 schema), and the
 * encryption and signature of http-mode callbacks: `{ encrypt }` is
 * base64(IV ‖ AES-256-CBC(body)) with the key SHA-256(Encrypt Key), and
 * `X-Lark-Signature` the hex SHA-256 of `timestamp + nonce + Encrypt Key +
 * raw body`.
 */
import { createCipheriv, createHash, randomBytes, randomUUID } from 'node:crypto';
import { postJson } from './signed-post.js';

/** Test credentials the fake accepts by default (the app id has the shape the SDK's long connection requires). */
export const FEISHU_TEST = {
  appId: 'cli_a1b2c3d4e5f60718',
  appSecret: 'fake-feishu-app-secret-0123456789',
  encryptKey: 'fake-feishu-encrypt-key-0123',
  verificationToken: 'fake-feishu-verification-token',
} as const;

/** The bot's open id at the fake. */
export const FEISHU_BOT_OPEN_ID = 'ou_bot0000000000000000000000000000';
/** People and chats of the tests. */
export const FEISHU_ANN = 'ou_ann0000000000000000000000000000';
export const FEISHU_BOB = 'ou_bob0000000000000000000000000000';
export const FEISHU_DM = 'oc_dm00000000000000000000000000000';
export const FEISHU_GROUP = 'oc_group000000000000000000000000000';

/** A fresh id with `prefix` (`om_`, …). */
export const feishuId = (prefix: string): string => `${prefix}${randomUUID().replaceAll('-', '')}`;

/** Options of `feishuMessageEvent`. */
export interface FeishuMessageOptions {
  text: string;
  chatId?: string;
  /** `p2p` (default) or `group`. */
  chatType?: 'p2p' | 'group';
  sender?: string;
  messageId?: string;
  eventId?: string;
  /** Mention the bot (`@_user_1` before the text). Default: in groups. */
  mentionBot?: boolean;
  /** A message in a thread: its thread id and root message id. */
  thread?: { threadId: string; rootId: string };
  messageType?: string;
}

/** The header of a v2 event. */
const header = (eventType: string, eventId: string | undefined, token: string) => ({
  event_id: eventId ?? randomUUID().replaceAll('-', ''),
  event_type: eventType,
  create_time: String(Date.now()),
  token,
  app_id: FEISHU_TEST.appId,
  tenant_key: 'tenant0',
});

/** An `im.message.receive_v1` event of a text message. */
export function feishuMessageEvent(o: FeishuMessageOptions, token: string = FEISHU_TEST.verificationToken): Record<string, any> {
  const chatType = o.chatType ?? 'p2p';
  const mention = o.mentionBot ?? chatType === 'group';
  return {
    schema: '2.0',
    header: header('im.message.receive_v1', o.eventId, token),
    event: {
      sender: { sender_id: { open_id: o.sender ?? FEISHU_ANN }, sender_type: 'user', tenant_key: 'tenant0' },
      message: {
        message_id: o.messageId ?? feishuId('om_'),
        ...(o.thread && { thread_id: o.thread.threadId, root_id: o.thread.rootId, parent_id: o.thread.rootId }),
        create_time: String(Date.now()),
        chat_id: o.chatId ?? (chatType === 'group' ? FEISHU_GROUP : FEISHU_DM),
        chat_type: chatType,
        message_type: o.messageType ?? 'text',
        content: JSON.stringify({ text: mention ? `@_user_1 ${o.text}` : o.text }),
        ...(mention && { mentions: [{ key: '@_user_1', id: { open_id: FEISHU_BOT_OPEN_ID }, name: 'steerbot', tenant_key: 'tenant0' }] }),
      },
    },
  };
}

/** A `card.action.trigger` callback: `operator` clicked a button whose value is `value` on card message `messageId` in `chatId`. */
export function feishuCardAction(
  o: { messageId: string; chatId: string; operator: string; value: Record<string, unknown>; eventId?: string },
  token: string = FEISHU_TEST.verificationToken,
): Record<string, any> {
  return {
    schema: '2.0',
    header: header('card.action.trigger', o.eventId, token),
    event: {
      operator: { tenant_key: 'tenant0', open_id: o.operator },
      token: `c-${randomUUID()}`,
      action: { value: o.value, tag: 'button' },
      host: 'im_message',
      context: { open_message_id: o.messageId, open_chat_id: o.chatId },
    },
  };
}

/** `body` encrypted as the platform does with an Encrypt Key: `{ encrypt }`. */
export function encryptCallback(body: unknown, encryptKey: string = FEISHU_TEST.encryptKey): { encrypt: string } {
  const key = createHash('sha256').update(encryptKey).digest();
  const iv = randomBytes(16);
  const cipher = createCipheriv('aes-256-cbc', key, iv);
  const data = Buffer.concat([cipher.update(JSON.stringify(body), 'utf8'), cipher.final()]);
  return { encrypt: Buffer.concat([iv, data]).toString('base64') };
}

/** The signature headers of raw body `raw` sent at `timestampSeconds` (default now). */
export function feishuSignedHeaders(raw: string, encryptKey: string = FEISHU_TEST.encryptKey, timestampSeconds?: number): Record<string, string> {
  const ts = String(timestampSeconds ?? Math.floor(Date.now() / 1000));
  const nonce = randomUUID();
  const signature = createHash('sha256').update(`${ts}${nonce}${encryptKey}${raw}`).digest('hex');
  return { 'x-lark-request-timestamp': ts, 'x-lark-request-nonce': nonce, 'x-lark-signature': signature };
}

/** Options of `postFeishuCallback`. */
export interface PostCallbackOptions {
  encryptKey?: string;
  /** Signed at this time, in Unix seconds (default now). */
  timestampSeconds?: number;
  /** Headers sent instead of the signature's (a forged or missing signature). */
  headers?: Record<string, string>;
  /** Send the body as it is, not encrypted. */
  plain?: boolean;
}

/** POSTs `body` to `url` as an http-mode callback: encrypted and signed; resolves with the status and the answer. */
export function postFeishuCallback(url: string, body: unknown, o: PostCallbackOptions = {}): Promise<{ status: number; body: any }> {
  const payload = o.plain ? body : encryptCallback(body, o.encryptKey);
  return postJson(url, payload, (raw) => o.headers ?? feishuSignedHeaders(raw, o.encryptKey, o.timestampSeconds));
}
