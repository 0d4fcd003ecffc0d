/**
 * The outbound side of the Slack channel: what delivery calls to send, edit
 * (streaming by throttled `chat.update`) and fetch shared files, through
 * the Web API client. Replies go into the conversation's thread, each with
 * its delivery key in its metadata; a resend after a runner died looks for
 * it first (`sent-lookup.ts`), so Slack shows a reply once.
 */
import type { WebClient } from '@slack/web-api';
import type { ChannelOutbound, EditOptions, OutboundFile, SendOptions } from 'steerbot/channel';
import { ChannelApiError, fetchFile, InvalidInputError, type Logger, type ReactionsSetting, staleReactions } from 'steerbot/plugin';
import { isWorkspaceAdmin } from './admins.js';
import { call, platformError, toChannelApiError } from './api.js';
import { buttonBlocks } from './blocks.js';
import { parseConversationId } from './conversation.js';
import { SLACK_MAX_FILE_BYTES, uploadFile } from './files-out.js';
import { escapeText, markdownToMrkdwn } from './mrkdwn.js';
import { deliveryMetadata, type SlackSelf, sentBefore } from './sent-lookup.js';

/**
 * Longest message sent, in characters. Slack truncates `text` past 40 000
 * and advises 4 000; Markdown conversion may lengthen a part a little.
 */
export const SLACK_MAX_MESSAGE_CHARS = 4000;

/** Options of `createSlackOutbound`. */
export interface SlackOutboundOptions {
  channelId: string;
  web: WebClient;
  /** The bot token: sent with file downloads, redacted from errors. */
  token: string;
  /** Least time between streaming edits in ms; absent: no streaming. */
  streamEditIntervalMs?: number;
  /** Status reactions (emoji names, `eyes`) on the person's messages; absent: none. */
  reactions?: ReactionsSetting;
  /** Let Slack unfurl links and media in the bot's messages (`linkPreviews`). Default false. */
  linkPreviews?: boolean;
  /** Origins a file URL may have for the bot token to be sent to it. */
  fileOrigins: readonly string[];
  logger: Logger;
  /** Fetch for file downloads. Default: global fetch. */
  fetch?: typeof fetch;
}

/** The text as Slack gets it: Markdown converted to mrkdwn, plain text escaped; either way no markup the model wrote pings anyone. */
const render = (text: string, format: 'markdown' | 'plain' | undefined) => (format === 'markdown' ? markdownToMrkdwn(text) : escapeText(text));

/** Who the bot is (`auth.test`), asked once, when a resend first looks for its message or an admin is first asked about; a failed ask is asked again next time. */
function selfOnce(opts: SlackOutboundOptions): () => Promise<SlackSelf> {
  let self: Promise<SlackSelf> | undefined;
  const ask = async (): Promise<SlackSelf> => {
    const me = await call('auth.test', () => opts.web.auth.test(), opts.token);
    if (!me.user_id) throw new ChannelApiError('slack auth.test named no bot user');
    return {
      userId: me.user_id,
      ...(me.bot_id && { botId: me.bot_id }),
      ...(me.team_id && { teamId: me.team_id }),
      ...(me.enterprise_id && { enterpriseId: me.enterprise_id }),
    };
  };
  return () => {
    if (!self) {
      const asked = ask();
      self = asked;
      asked.catch(() => {
        if (self === asked) self = undefined;
      });
    }
    return self;
  };
}

/** `chat.postMessage` into the conversation's thread, with the delivery key in the metadata; a resend first looks for the message (`sent-lookup.ts`). */
async function sendReply(
  opts: SlackOutboundOptions & { self: () => Promise<SlackSelf> },
  conversationId: string,
  text: string,
  sendOpts: SendOptions,
): Promise<{ messageId: string }> {
  const { web, token } = opts;
  const target = parseConversationId(opts.channelId, conversationId);
  const body = render(text, sendOpts.format);
  const blocks = sendOpts.buttons?.length ? buttonBlocks(body, sendOpts.buttons) : undefined;
  const key = sendOpts.deliveryKey;
  if (key !== undefined && sendOpts.maybeSentSince !== undefined) {
    const earlier = await sentBefore(opts, target, { key, sinceMs: sendOpts.maybeSentSince, body, blocks });
    if (earlier !== undefined) return { messageId: earlier };
  }
  const sent = await call(
    'chat.postMessage',
    () =>
      web.chat.postMessage({
        channel: target.channel,
        text: body,
        ...(target.threadTs !== undefined && { thread_ts: target.threadTs }),
        ...(blocks && { blocks }),
        // The key lets a takeover find this message if our runner dies before recording it (sent-lookup.ts).
        ...(key !== undefined && { metadata: deliveryMetadata(key) }),
        // Slack fetches what it unfurls at once (media by default): off unless the operator turned previews on.
        unfurl_links: opts.linkPreviews === true,
        unfurl_media: opts.linkPreviews === true,
      }),
    token,
  );
  if (!sent.ts) throw toChannelApiError(new Error('no ts in the answer'), 'chat.postMessage', token);
  return { messageId: sent.ts };
}

/** Builds the outbound side. Every method throws ChannelApiError (429: with `retryAfterMs`). */
export function createSlackOutbound(opts: SlackOutboundOptions): ChannelOutbound {
  const { web, token, channelId } = opts;
  const withSelf = { ...opts, self: selfOnce(opts) };

  const outbound: ChannelOutbound = {
    channelId,
    maxMessageChars: SLACK_MAX_MESSAGE_CHARS,

    send: (conversationId: string, text: string, sendOpts: SendOptions = {}) => sendReply(withSelf, conversationId, text, sendOpts),
    sendFile: (conversationId: string, file: OutboundFile) => uploadFile(opts, parseConversationId(channelId, conversationId), file),
    maxFileBytes: SLACK_MAX_FILE_BYTES,

    async edit(conversationId: string, messageId: string, text: string, editOpts: EditOptions = {}) {
      const target = parseConversationId(channelId, conversationId);
      try {
        await web.chat.update({ channel: target.channel, ts: messageId, text: render(text, editOpts.format) });
      } catch (err) {
        // Nothing changed: what the caller wanted already.
        if (platformError(err) === 'no_changes') return;
        throw toChannelApiError(err, 'chat.update', token);
      }
    },

    // Admins of the bot's own workspace only: a Slack Connect member from another organization is no admin here.
    isAdmin: (_conversationId: string, userId: string) => isWorkspaceAdmin(web, token, withSelf.self, userId),

    async fetchAttachment(attachment, { maxBytes, signal }) {
      if (attachment.size !== undefined && attachment.size > maxBytes) {
        throw new InvalidInputError(`attachment is ${attachment.size} bytes, more than ${maxBytes}`);
      }
      let url: URL;
      try {
        url = new URL(attachment.ref);
      } catch {
        throw new InvalidInputError('not a Slack file URL');
      }
      // The bot token goes to Slack's file hosts only, never to a URL someone put in a message.
      if (!opts.fileOrigins.includes(url.origin)) throw new InvalidInputError(`file host ${url.origin} is not one of Slack's (filesOrigins)`);
      const base = opts.fetch ?? fetch;
      const withToken: typeof fetch = (input, init) => base(input, { ...init, headers: { authorization: `Bearer ${token}` } });
      return fetchFile(url.href, { maxBytes, ...(signal && { signal }), fetch: withToken, label: `Slack file ${attachment.name ?? ''}`.trim() });
    },
  };
  const interval = opts.streamEditIntervalMs;
  if (interval !== undefined) outbound.streamEditIntervalMs = () => interval;
  const reactions = opts.reactions;
  if (reactions) {
    outbound.react = async (conversationId, messageId, status) => {
      const { channel } = parseConversationId(channelId, conversationId);
      const name = reactions[status];
      // Slack keeps every reaction: an answer or a failure takes the bot's other status reactions off. Either may be done already.
      const stale = staleReactions(reactions, status);
      await Promise.all(stale.map((old) => reaction(() => web.reactions.remove({ channel, timestamp: messageId, name: old }), 'no_reaction')));
      await reaction(() => web.reactions.add({ channel, timestamp: messageId, name }), 'already_reacted');
    };
  }
  return outbound;

  /** One reactions call; `done` is the error Slack gives when it changes nothing. */
  async function reaction(fn: () => Promise<unknown>, done: string): Promise<void> {
    try {
      await fn();
    } catch (err) {
      if (platformError(err) !== done) throw toChannelApiError(err, 'reactions', token);
    }
  }
}
