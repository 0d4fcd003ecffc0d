/** Configuration of the Feishu / Lark channel (`channels.feishu` in the config file), validated with zod at load. */

import { int, reactionsSetting } from 'steerbot/plugin';
import { z } from 'zod';

/** The open platform's API root of each named domain. */
export const FEISHU_DOMAINS = { feishu: 'https://open.feishu.cn', lark: 'https://open.larksuite.com' } as const;

const path = (fallback: string) =>
  z
    .string()
    .regex(/^\/[A-Za-z0-9/_.-]*$/, { error: 'expected a path starting with /' })
    .default(fallback);

/** Schema of the Feishu / Lark channel settings. Unknown keys are errors. */
export const feishuConfigSchema = z
  .strictObject({
    appId: z
      .string({ error: 'expected the app id' })
      .regex(/^cli_[0-9a-fA-F]{16}$/, { error: 'expected the app id (cli_ and 16 hex digits, from the app\'s "Credentials & Basic Info")' })
      .describe('App ID of the custom app (`cli_…`, from "Credentials & Basic Info"). Required.'),
    appSecret: z
      .string({ error: 'expected the app secret' })
      .min(16, { error: 'expected the app secret (from "Credentials & Basic Info")' })
      .describe('App Secret of the custom app: the SDK trades it for a tenant access token. Secret: never logged. Required.'),
    domain: z
      .union([z.enum(['feishu', 'lark']), z.url({ protocol: /^https?$/ }).refine((u) => !u.endsWith('/'), { error: 'remove the trailing /' })])
      .default('feishu')
      .describe(
        'Which platform: `feishu` (open.feishu.cn), `lark` (open.larksuite.com), or an API root URL without a trailing slash (a local fake in tests). Default `feishu`.',
      ),
    mode: z
      .enum(['ws', 'http'])
      .default('ws')
      .describe(
        'How events and card clicks arrive: `ws` over the long connection the SDK opens (no public URL needed), or `http` as callbacks to `webhookPath` (encrypted and signed). Default `ws`.',
      ),
    encryptKey: z
      .string()
      .min(8, { error: 'expected the Encrypt Key (from "Events & Callbacks" → "Encryption Strategy")' })
      .optional()
      .describe(
        'Encrypt Key ("Events & Callbacks" → "Encryption Strategy"): callbacks are decrypted and their `X-Lark-Signature` checked with it. Secret. Required in http mode.',
      ),
    verificationToken: z
      .string()
      .min(8, { error: 'expected the Verification Token (from "Events & Callbacks" → "Encryption Strategy")' })
      .optional()
      .describe('Verification Token ("Events & Callbacks" → "Encryption Strategy"): every callback must carry it. Secret. Required in http mode.'),
    webhookPath: path('/feishu/events').describe('Route events and card callbacks are POSTed to (http mode). Default `/feishu/events`.'),
    maxSkewSeconds: int(30, 3600)
      .default(300)
      .describe('http mode: oldest `X-Lark-Request-Timestamp` accepted, in seconds from now (replays are refused). Default 300.'),
    // Emoji types of the platform's reaction set (its names, not Unicode emoji).
    reactions: reactionsSetting({ taken: 'OnIt', answered: 'DONE', failed: 'CrossMark' }),
    rateLimitRetryMs: int(100, 600_000)
      .default(1000)
      .describe('Wait before a rate-limited call is retried when the platform names no `x-ogw-ratelimit-reset`, in ms. Default 1000.'),
    timeoutMs: int(1000, 120_000).default(15_000).describe('Timeout of one API call, in ms. Default 15 000.'),
  })
  .superRefine((c, ctx) => {
    if (c.mode !== 'http') return;
    for (const key of ['encryptKey', 'verificationToken'] as const) {
      if (c[key] === undefined) ctx.addIssue({ code: 'custom', path: [key], message: 'required in http mode (or use mode: ws, the long connection)' });
    }
  });

/** The API root `domain` names. */
export const domainUrl = (domain: string): string => (domain === 'feishu' || domain === 'lark' ? FEISHU_DOMAINS[domain] : domain);

/** Feishu / Lark channel settings after defaults. */
export type FeishuConfig = z.output<typeof feishuConfigSchema>;
/** Feishu / Lark channel settings as written in a config file (defaults optional). */
export type FeishuConfigInput = z.input<typeof feishuConfigSchema>;
