/**
 * The Matrix channel (a bot account on any homeserver, through the
 * client-server API): the definition — id, settings, variables, the keys it
 * keeps. The channel itself is imported only when a Matrix section is
 * configured.
 */
import { defineChannelPlugin } from 'steerbot/channel';
import { matrixConfigSchema } from './config.js';
import { MATRIX_CONVERSATION_KEYS, MATRIX_PLUGIN_ID } from './keys.js';

/** The Matrix channel (`channels.matrix`), on when `MATRIX_ACCESS_TOKEN` is set. */
export default defineChannelPlugin({
  id: MATRIX_PLUGIN_ID,
  kind: 'channel',
  description: 'Matrix through a bot account: the /sync long poll in, PUT send (transaction id = delivery key) out.',
  configSchema: matrixConfigSchema,
  storage: { conversationKeys: MATRIX_CONVERSATION_KEYS },
  redact: { paths: ['accessToken'] },
  env: [
    { env: 'MATRIX_ACCESS_TOKEN', path: 'accessToken', kind: 'string', secret: true, enables: true },
    { env: 'MATRIX_HOMESERVER_URL', path: 'homeserverUrl', kind: 'string' },
    { env: 'MATRIX_USER_ID', path: 'userId', kind: 'string' },
    { env: 'MATRIX_AUTO_JOIN', path: 'autoJoin', kind: 'list' },
  ],
  create: async (config, deps) => (await import('./channel.js')).createMatrixPlugin(config, deps),
});
