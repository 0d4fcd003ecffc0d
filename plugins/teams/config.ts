/** Configuration of the Microsoft Teams channel (`channels.teams` in the config file), validated with zod at load. */

import { int } from 'steerbot/plugin';
import { z } from 'zod';

/** A URL root without a trailing slash. */
const root = (what: string) =>
  z.url({ protocol: /^https?$/, error: `expected the ${what} URL` }).refine((u) => !u.endsWith('/'), { error: 'remove the trailing /' });

/** A host name (or `*.`-less suffix) a service URL may have. */
const host = z.string().regex(/^[a-z0-9.-]{1,253}$/i, { error: 'expected a host name like smba.trafficmanager.net' });

/** Schema of the Teams channel settings. Unknown keys are errors. */
export const teamsConfigSchema = z.strictObject({
  appId: z
    .string({ error: 'expected the app id' })
    .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, { error: 'expected the app (client) id, a GUID' })
    .describe("Microsoft App ID of the Azure Bot (the Entra app registration's client id): the audience every inbound token must name. Required."),
  appPassword: z
    .string({ error: 'expected the client secret' })
    .min(16, { error: 'expected the client secret of the app registration' })
    .describe("Client secret of the app registration (Certificates & secrets): gets the bot's Bot Connector token. Secret: never logged. Required."),
  tenantId: z
    .string({ error: 'expected the tenant id' })
    .regex(/^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|botframework\.com)$/i, { error: 'expected the directory (tenant) id, a GUID' })
    .describe('Directory (tenant) id of the app registration (single-tenant bot); `botframework.com` for a legacy multi-tenant one. Required.'),
  webhookPath: z
    .string()
    .regex(/^\/[A-Za-z0-9/_.-]*$/, { error: 'expected a path starting with /' })
    .default('/api/messages')
    .describe("Route activities are POSTed to: the Azure Bot's messaging endpoint is `https://<your host><webhookPath>`. Default `/api/messages`."),
  authorityEndpoint: root('Entra authority')
    .default('https://login.microsoftonline.com')
    .describe(
      "Entra authority the bot's own token comes from (`<authority>/<tenant>/oauth2/v2.0/token`, client credentials). A local fake in tests. Default `https://login.microsoftonline.com`.",
    ),
  botFrameworkKeysUrl: z
    .url({ protocol: /^https?$/, error: 'expected the URL of a JSON Web Key Set' })
    .default('https://login.botframework.com/v1/.well-known/keys')
    .describe(
      'Where Bot Service publishes the keys it signs activity tokens with. Only tokens it issued (`https://api.botframework.com`) are accepted, checked against these keys. A local fake in tests. Default `https://login.botframework.com/v1/.well-known/keys`.',
    ),
  serviceUrl: z
    .url({ protocol: /^https?$/ })
    .default('https://smba.trafficmanager.net/teams/')
    .describe(
      'Bot Connector service URL for a conversation the bot has no stored reference of (no activity seen from it yet). Default `https://smba.trafficmanager.net/teams/`.',
    ),
  serviceUrlHosts: z
    .array(host)
    .max(50)
    .default([])
    .describe(
      "Hosts (and their subdomains) an activity's `serviceUrl` may have besides Teams' own (smba.trafficmanager.net, …); any other is refused, so the bot's token goes nowhere else. These may use http (a local fake). Default none.",
    ),
  microsoftHosts: z
    .boolean()
    .default(true)
    .describe(
      "Whether Teams' Bot Connector hosts (smba.trafficmanager.net, and teams.microsoft.com and teams.microsoft.us for the government clouds) are allowed as service URLs, over https. Default true.",
    ),
  timeoutMs: int(1000, 120_000).default(15_000).describe("Timeout of one request for the bot's token or Bot Service's signing keys, in ms. Default 15 000."),
  rateLimitRetryMs: int(100, 600_000)
    .default(5000)
    .describe('Wait before a rate-limited call (429) is retried when the answer names no `Retry-After`, in ms. Default 5000.'),
  filesUrl: z
    .url({ protocol: /^https$/, error: 'expected an https:// URL (Teams shows images and opens links over HTTPS only)' })
    .refine((u) => !u.endsWith('/'), { error: 'remove the trailing /' })
    .optional()
    .describe(
      "Where this host's routes are reached from outside over HTTPS (e.g. `https://bot.example.com`). Set: a file the agent sends is kept `fileTtlSeconds` and sent by a signed URL under `/teams/files` (an image inline, any other file or a spoken reply as a card with a Download or Play button). Default: unset (a file becomes a text message saying it could not be sent).",
    ),
  fileTtlSeconds: int(60, 7 * 86_400)
    .default(86_400)
    .describe('How long a sent file can be fetched from its URL, in seconds (its bytes expire from Redis then). Default 86 400 (a day).'),
  maxFileBytes: int(1024, 50 * 1024 * 1024)
    .default(20 * 1024 * 1024)
    .describe(
      'Largest file kept for download, in bytes; a larger one becomes a text message. Images over 4 MB go as a card with a Download button instead of inline. Default 20 971 520 (20 MiB).',
    ),
});

/** Teams channel settings after defaults. */
export type TeamsConfig = z.output<typeof teamsConfigSchema>;
/** Teams channel settings as written in a config file (defaults optional). */
export type TeamsConfigInput = z.input<typeof teamsConfigSchema>;
