/**
 * Settings of the http-agent runner plugin (`agents.http-agent`), validated
 * with zod at load.
 */

import { int } from 'steerbot/plugin';
import { DEFAULTS } from 'steerbot/runner';
import { z } from 'zod';

const url = () => z.url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' });

// Longest timeout the settings take (5 min): a silence longer than that is a dead agent, not a slow one.
const MAX_TIMEOUT_MS = 300_000;

/** Schema of the http-agent settings. Unknown keys are errors. */
export const httpAgentConfigSchema = z.strictObject({
  url: url().describe('The agent service: every run invocation is POSTed here (signed), and so are cancel requests. Required.'),
  secret: z
    .string({ error: 'expected a secret of at least 16 characters' })
    .min(16, { error: 'expected at least 16 characters' })
    .max(512, { error: 'expected at most 512 characters' })
    .describe(
      'HMAC-SHA256 key that signs the requests to the agent (`X-Steerbot-Signature`, as the webhook channel signs). Secret. Required, at least 16 characters.',
    ),
  publicUrl: url()
    .optional()
    .describe(
      "Base URL at which the agent reaches this runner's HTTP server, for the run endpoints (`<publicUrl>/http-agent/runs/<run id>/steering`). Default: the address the server listens at.",
    ),
  connectTimeoutMs: int(100, MAX_TIMEOUT_MS)
    .default(10_000)
    .describe('How long the agent has to answer a request with its status and headers, in ms. Default 10 000.'),
  firstEventTimeoutMs: int(100, MAX_TIMEOUT_MS)
    .default(60_000)
    .describe('How long the agent has from its response headers to the first line of its event stream, in ms. Default 60 000.'),
  idleTimeoutMs: int(100, MAX_TIMEOUT_MS)
    .default(60_000)
    .describe('Longest silence between two lines of the event stream, in ms (a blank line is a keep-alive). Default 60 000.'),
  maxEventBytes: int(1024, 16 * 1024 * 1024)
    .default(1_048_576)
    .describe('Longest event line, in bytes. Default 1 048 576 (1 MiB).'),
  maxMessageChars: int(1, 1_000_000).default(32_000).describe('Longest message (and streamed text of one answer), in characters. Default 32 000.'),
  maxStateBytes: int(2, DEFAULTS.maxStateBytes)
    .default(65_536)
    .describe(`Largest agent state (the JSON object its \`state\` events write), in bytes. Default 65 536; at most ${DEFAULTS.maxStateBytes}.`),
  steeringMode: z
    .enum(['all', 'one'], { error: 'expected all or one' })
    .default('all')
    .describe('Steering a continuation takes when a run ends with messages waiting that the agent did not pull: `all` or `one`. Default `all`.'),
});

/** The http-agent settings, defaults applied. */
export type HttpAgentConfig = z.output<typeof httpAgentConfigSchema>;
/** The http-agent settings as written in a config file. */
export type HttpAgentConfigInput = z.input<typeof httpAgentConfigSchema>;
