/**
 * Fuzzed requests for the webhook channel and the Telegram webhook, from
 * fast-check arbitraries sampled with a fixed seed (reproducible: the seed is
 * printed): random bytes, random JSON shapes, bodies close to valid with
 * hostile fields, deep nesting, huge strings, NUL and lone surrogates,
 * `__proto__` / `constructor` keys, duplicate keys. Ids of near-valid bodies
 * are unique per case, so an accepted request's keys can be told from keys a
 * rejected one should never have written.
 */
import fc from 'fast-check';

/** One request to send. */
export interface FuzzCase {
  target: 'webhook' | 'telegram';
  /** What the generator meant to produce (for the summary). */
  kind: string;
  body: Buffer;
  /** Sign / authenticate it correctly, wrongly, or not at all. */
  auth: 'good' | 'bad' | 'none';
  /** An `Idempotency-Key` header (webhook only). */
  idempotencyKey?: string;
}

/** Placeholder a case's unique id replaces (a string no arbitrary below produces). */
const UNIQUE = '\u0001unique\u0001';
/** Placeholder of a unique integer (Telegram ids). */
const UNIQUE_INT = 7_777_777_777_777;

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
const hostileChar = fc.oneof(
  loneSurrogate,
  fc.constantFrom('\u0000', '\u0001', '\u001f', '{', '}', ':', ' ', '\n', '\u202e', '\ufeff', '\u2028', '"', '\\', '%', '*', '?'),
);
const hostileString = fc.oneof(
  fc.string({ unit: fc.oneof(hostileChar, fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 })), maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\ud800',
    '\udfff',
    '\ud83d',
    '__proto__',
    'constructor',
    'prototype',
    'toString',
    '{c:x}',
    '}{',
    '/stop',
    '/new',
    '/queue interrupt',
    '/purge',
    '/status',
    '/compact',
  ),
);
/** A long string: around the channel's body limit (256 KiB) and the server's (1 MiB). */
const hugeString = fc
  .tuple(fc.constantFrom(1_000, 100_000, 250_000, 300_000, 1_100_000), fc.constantFrom('x', '\u0000', '\ud800', 'é', '😀', ' '))
  .map(([n, c]) => c.repeat(Math.ceil(n / c.length)));
const hostileKey = fc.oneof(hostileString, fc.constantFrom('__proto__', 'constructor', 'prototype', '__defineGetter__', 'hasOwnProperty'));
const anyJson = fc.jsonValue({ maxDepth: 4 });
const wild = fc.oneof(
  { weight: 3, arbitrary: hostileString },
  { weight: 2, arbitrary: anyJson },
  { weight: 1, arbitrary: fc.anything({ maxDepth: 3, withNullPrototype: true, withObjectString: true }) },
);

/** Deeply nested JSON text: arrays or objects, up to 200 000 levels. */
const deepJson = fc
  .tuple(fc.constantFrom(100, 1_000, 10_000, 200_000), fc.boolean())
  .map(([depth, arrays]) => (arrays ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`));

/**
 * A body close to valid: a valid one (hostile but allowed strings where the
 * schema allows them) with up to two fields replaced by anything or removed,
 * so about half get through and the other half fail on one field.
 */
function nearValid(valid: fc.Arbitrary<Record<string, unknown>>, fields: readonly string[]): fc.Arbitrary<Record<string, unknown>> {
  const mutation = fc.record({ field: fc.constantFrom(...fields), value: fc.option(wild, { nil: undefined }) });
  return fc.tuple(valid, fc.array(mutation, { maxLength: 2 })).map(([body, mutations]) => {
    const out: Record<string, unknown> = { ...body };
    for (const m of mutations) {
      if (m.value === undefined) delete out[m.field];
      else out[m.field] = m.value;
    }
    return out;
  });
}

const nonEmptyHostile = hostileString.filter((s) => s.length > 0 && s.length <= 128);
const attachment = fc.record(
  {
    kind: fc.constantFrom('image', 'audio', 'video', 'file', 'sticker', 'other'),
    ref: fc.oneof(fc.webUrl(), nonEmptyHostile),
    name: hostileString,
    mime: hostileString,
    size: fc.nat(),
  },
  { requiredKeys: ['kind', 'ref'] },
);
const validWebhookBody = fc.record(
  {
    id: fc.constant(UNIQUE),
    conversation: fc.constant(UNIQUE),
    sender: fc.record({ id: fc.oneof(fc.constant('ann'), nonEmptyHostile), name: hostileString }, { requiredKeys: ['id'] }),
    text: fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom('hello', '/status', '/stop', '/new', '/queue collect', '/purge', '/compact') },
      { weight: 3, arbitrary: hostileString },
      { weight: 1, arbitrary: hugeString },
    ),
    attachments: fc.array(attachment, { maxLength: 3 }),
    metadata: fc.dictionary(hostileKey, anyJson, { maxKeys: 8 }),
    group: fc.boolean(),
  },
  { requiredKeys: ['id', 'conversation', 'sender', 'text'] },
);
const webhookBody = nearValid(validWebhookBody, ['id', 'conversation', 'sender', 'text', 'attachments', 'metadata', 'group']);

const validTelegramMessage = fc.record(
  {
    message_id: fc.nat(),
    from: fc.record(
      { id: fc.oneof(fc.constant(UNIQUE_INT), fc.integer()), is_bot: fc.boolean(), first_name: hostileString, username: hostileString },
      { requiredKeys: ['id'] },
    ),
    chat: fc.record(
      { id: fc.constant(UNIQUE_INT), type: fc.constantFrom('private', 'group', 'supergroup', 'channel'), is_forum: fc.boolean(), title: hostileString },
      { requiredKeys: ['id', 'type'] },
    ),
    // Mostly now: the webhook drops a message dated outside the replay window before it is read further.
    date: fc.oneof({ weight: 4, arbitrary: fc.constant(Math.floor(Date.now() / 1000)) }, { weight: 1, arbitrary: fc.nat() }),
    text: fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom('hello @steer_test_bot', '/stop', '/new@steer_test_bot', '/queue interrupt', '/status', '/purge') },
      { weight: 3, arbitrary: hostileString },
      { weight: 1, arbitrary: hugeString },
    ),
    entities: fc.array(
      fc.record({
        type: fc.constantFrom('mention', 'bot_command', 'text_mention', 'url', 'x'),
        offset: fc.nat({ max: 1_000_000 }),
        length: fc.nat({ max: 1_000_000 }),
      }),
      { maxLength: 20 },
    ),
    message_thread_id: fc.integer(),
    is_topic_message: fc.boolean(),
    caption: hostileString,
    photo: fc.array(fc.record({ file_id: nonEmptyHostile, width: fc.integer(), height: fc.integer(), file_size: fc.nat() }), { maxLength: 5 }),
    document: fc.record({ file_id: nonEmptyHostile, file_name: hostileString, mime_type: hostileString, file_size: fc.nat() }),
    reply_to_message: fc.record({ message_id: fc.integer(), text: hostileString, from: fc.record({ id: fc.integer(), is_bot: fc.boolean() }) }),
  },
  { requiredKeys: ['message_id', 'chat', 'date'] },
);
const telegramMessage = nearValid(validTelegramMessage, ['message_id', 'from', 'chat', 'text', 'entities', 'message_thread_id', 'photo', 'reply_to_message']);
/** A click on a button under a bot message: its `data` is a command (approve, stop, …) or anything. */
const telegramCallbackQuery = nearValid(
  fc.record(
    {
      id: fc.oneof(fc.constant('cq1'), nonEmptyHostile),
      from: fc.record({ id: fc.integer(), is_bot: fc.boolean(), first_name: hostileString }, { requiredKeys: ['id'] }),
      data: fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom('/stop', '/new', '/status', '/approve x', '/deny x', '/approve', '/queue steer', '/purge') },
        { weight: 2, arbitrary: hostileString.map((t) => `/${t}`.slice(0, 64)) },
        { weight: 1, arbitrary: hostileString.filter((t) => t.length <= 64) },
      ),
      message: validTelegramMessage,
    },
    { requiredKeys: ['id', 'from'] },
  ),
  ['id', 'from', 'data', 'message'],
);
const telegramUpdate = nearValid(
  fc.record(
    {
      update_id: fc.constant(UNIQUE_INT),
      message: telegramMessage,
      edited_message: telegramMessage,
      callback_query: fc.oneof({ weight: 3, arbitrary: telegramCallbackQuery }, { weight: 1, arbitrary: wild }),
      my_chat_member: wild,
    },
    { requiredKeys: ['update_id'] },
  ),
  ['update_id', 'message', 'callback_query'],
);

/** Serializes a body, giving each placeholder a fresh unique value. */
function serialize(value: unknown, fresh: () => number): string {
  return JSON.stringify(value, (_k, v: unknown) => (v === UNIQUE ? `f${fresh()}` : v === UNIQUE_INT ? 9_000_000_000 + fresh() : v)) ?? 'null';
}

/** Raw JSON text with `__proto__` / `constructor` keys and duplicate keys around an otherwise fine body. */
const protoText = (base: fc.Arbitrary<unknown>) =>
  fc
    .tuple(base, anyJson, fc.constantFrom('__proto__', 'constructor', 'prototype'), fc.boolean())
    .map(([body, evil, key, duplicate]) => ({ body, evil, key, duplicate }));

function shapes(target: FuzzCase['target']): Array<{ weight: number; arbitrary: fc.Arbitrary<{ kind: string; make: (fresh: () => number) => Buffer }> }> {
  const near = target === 'webhook' ? webhookBody : telegramUpdate;
  const json = (kind: string, arb: fc.Arbitrary<unknown>) => arb.map((v) => ({ kind, make: (fresh: () => number) => Buffer.from(serialize(v, fresh)) }));
  return [
    { weight: 6, arbitrary: json('near-valid', near) },
    { weight: 2, arbitrary: json('random-json', anyJson) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2048 }).map((b) => ({ kind: 'random-bytes', make: () => Buffer.from(b) })) },
    {
      weight: 1,
      arbitrary: fc.tuple(fc.uint8Array({ minLength: 1, maxLength: 16 }), near).map(([bytes, v]) => ({
        // Invalid UTF-8 inside an otherwise fine body: decoded to U+FFFD, or refused.
        kind: 'invalid-utf8',
        make: (fresh: () => number) => {
          const text = serialize(v, fresh);
          const at = Math.max(1, text.indexOf('"', 1) + 1);
          return Buffer.concat([Buffer.from(text.slice(0, at)), Buffer.from(bytes).map((b) => b | 0x80), Buffer.from(text.slice(at))]);
        },
      })),
    },
    { weight: 1, arbitrary: deepJson.map((t) => ({ kind: 'deep-nesting', make: () => Buffer.from(t) })) },
    {
      weight: 1,
      arbitrary: fc.tuple(near, deepJson, fc.constantFrom('metadata', 'text', 'sender', 'message', 'attachments')).map(([v, deep, field]) => ({
        kind: 'deep-field',
        make: (fresh: () => number) => {
          const text = serialize(v, fresh);
          const inner = text.startsWith('{') && text.length > 2 ? `,${text.slice(1)}` : '}';
          return Buffer.from(`{${JSON.stringify(field)}:${deep}${inner}`);
        },
      })),
    },
    {
      weight: 1,
      arbitrary: protoText(near).map(({ body, evil, key, duplicate }) => ({
        kind: 'proto-keys',
        make: (fresh: () => number) => {
          const text = serialize(body, fresh);
          const inner = text.startsWith('{') && text.length > 2 ? text.slice(1, -1) : '';
          const dup = duplicate && inner ? `,${inner}` : '';
          return Buffer.from(
            `{${JSON.stringify(key)}:${JSON.stringify(evil)}${inner ? `,${inner}` : ''}${dup},"__proto__":{"text":"polluted","isAdmin":true}}`,
          );
        },
      })),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom('', '{', 'null', '[]', '""', '0', 'true', '{"a":1}{"b":2}', '\u0000', '\ufeff{}')
        .map((t) => ({ kind: 'edge-text', make: () => Buffer.from(t) })),
    },
  ];
}

/** `count` cases for `target`, reproducible from `seed`. Unique ids are numbered from `firstId`. */
export function fuzzCases(target: FuzzCase['target'], count: number, seed: number, firstId: number): FuzzCase[] {
  let next = firstId;
  const fresh = () => next++;
  const arb = fc.tuple(
    fc.oneof(...shapes(target)),
    fc.constantFrom<FuzzCase['auth']>('good', 'good', 'good', 'good', 'good', 'good', 'good', 'good', 'bad', 'none'),
    fc.option(hostileString, { nil: undefined, freq: 10 }),
  );
  return fc.sample(arb, { seed, numRuns: count }).map(([shape, auth, idempotencyKey]) => ({
    target,
    kind: shape.kind,
    body: shape.make(fresh),
    auth,
    ...(target === 'webhook' && idempotencyKey !== undefined && { idempotencyKey }),
  }));
}

/** The deepest nesting of arrays and objects in a JSON text (strings skipped), for the summary. */
export function nestingDepth(body: Buffer): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  let escaped = false;
  for (const byte of body) {
    if (inString) {
      if (escaped) escaped = false;
      else if (byte === 0x5c) escaped = true;
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) inString = true;
    else if (byte === 0x5b || byte === 0x7b) max = Math.max(max, ++depth);
    else if (byte === 0x5d || byte === 0x7d) depth--;
  }
  return max;
}
