/**
 * The Matrix channel passes the channel contract (events in through the
 * real `/sync` long poll, sends, edits, typing, status reactions and files
 * out, against the fake homeserver; buttons as a poll, a click as a poll
 * response). Each contract chat is a room the bot and the sender are in;
 * the contract's digit ids are used as the senders' user ids as they are.
 */
import { createMatrixPlugin } from '../../plugins/matrix/channel.js';
import { keptPoll } from '../../plugins/matrix/poll-store.js';
import { answerIdOf } from '../../plugins/matrix/polls.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { MATRIX_TEST, type MatrixEvent, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { redisUrl } from '../helpers/redis.js';

const eventIdOf = (m: ContractMessage) => `$contract${m.updateId}`;

channelPluginContract({
  name: 'matrix',
  redisUrl: redisUrl(),
  // The plugin's default status reactions (`reactions: true`).
  capabilities: { typing: true, edit: true, files: true, reactions: { taken: '👀', answered: '✅', failed: '❌' }, buttons: 'interaction' },
  makeHarness: async (env: ChannelContractEnv) => {
    const matrix = await startFakeMatrix();
    const plugin = createMatrixPlugin(
      { ...MATRIX_TEST, homeserverUrl: matrix.url, reactions: true },
      { logger: env.logger, redis: env.redis, prefix: env.prefix },
    );
    const rooms = new Map<string, string>();
    const events = new Map<string, MatrixEvent>();
    const roomOf = (m: Pick<ContractMessage, 'chatId' | 'sender'>) => {
      let roomId = rooms.get(m.chatId);
      if (!roomId) rooms.set(m.chatId, (roomId = matrix.createRoom([MATRIX_TEST.userId, m.sender.id])));
      return roomId;
    };
    // Messages sent before the first incremental /sync would be history the bot does not answer.
    const syncing = () => matrix.waitUntil(() => matrix.calls.some((c) => c.kind === 'sync' && c.query.since !== undefined), 10_000, 'an incremental /sync');
    return {
      plugin,
      async inject(m) {
        await syncing();
        const roomId = roomOf(m);
        const seen = events.get(m.updateId);
        if (seen) return matrix.redeliver(roomId, seen);
        events.set(m.updateId, matrix.message(roomId, m.sender.id, m.text, { eventId: eventIdOf(m) }));
      },
      expected(m) {
        return { updateKey: `matrix:${eventIdOf(m)}`, conversationId: `matrix:${roomOf(m)}` };
      },
      received: async (chatId) => matrix.texts(rooms.get(chatId) ?? ''),
      files: async (chatId) =>
        matrix.sent
          .filter((e) => e.roomId === rooms.get(chatId) && typeof e.content.url === 'string')
          .map((e) => ({ name: String(e.content.filename ?? e.content.body), bytes: matrix.media.get(String(e.content.url))!.data })),
      typingCount: async (chatId) => matrix.typing.filter((r) => r === rooms.get(chatId)).length,
      reactions: async (chatId, messageId) =>
        matrix
          .reactions(rooms.get(chatId) ?? '')
          .filter((r) => r.startsWith(`${messageId} `))
          .map((r) => r.slice(messageId.length + 1)),
      // The buttons of the bot's last poll: each answer's label, and the command its id was made from (kept by the plugin).
      async buttons(chatId) {
        const roomId = rooms.get(chatId) ?? '';
        const poll = matrix.polls(roomId).at(-1);
        const kept = poll && (await keptPoll(env.redis, env.prefix, `matrix:${roomId}`, poll.eventId));
        return poll && kept ? poll.answers.map((a) => ({ label: a.label, command: kept.answers[a.id] ?? '' })) : [];
      },
      async click(chatId, command, sender) {
        // A response before the bot's first incremental /sync would be history, like a message (inject).
        await syncing();
        const roomId = rooms.get(chatId) ?? '';
        const poll = matrix.polls(roomId).at(-1)!;
        matrix.pollResponse(roomId, sender.id, poll.eventId, [answerIdOf(command)]);
      },
      close: () => matrix.close(),
    };
  },
});
