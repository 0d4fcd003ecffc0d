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
const hostileChar = fc.oneof(loneSurrogate, fc.constantFrom('\u0000', '\u0001', '\u001f', '{', '}', ':', ' ', '\n', '\u202e', '\ufeff', '\u2028', '"', '\\', '%', '*', '?'));
const hostileString = fc.oneof(
  fc.string({ unit: fc.oneof(hostileChar, fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 })), maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('', ' ', '\u0000', 'a\u0000b', '\ud800', '\udfff', '\ud83d', '__proto__', 'constructor', 'prototype', 'toString', '{c:x}', '}{', '/stop', '/new', '/queue interrupt', '/purge', '/status', '/compact'),
);
/** A long string: around the channel's body limit (256 KiB) and the server's (1 MiB). */
const hugeString = fc
  .tuple(fc.constantFrom(1_000, 100_000, 250_000, 300_000, 1_100_000), fc.constantFrom('x', '\u0000', '\ud800', 'é', '😀', ' '))
  .map(([n, c]) => c.repeat(Math.ceil(n / c.length)));
const hostileKey = fc.oneof(hostileString, fc.constantFrom('__proto__', 'constructor', 'prototype', '__defineGetter__', 'hasOwnProperty'));
const anyJson = fc.jsonValue({ maxDepth: 4 });
const wild = fc.oneof({ weight: 3, arbitrary: hostileString }, { weight: 2, arbitrary: anyJson }, { weight: 1, arbitrary: fc.anything({ maxDepth: 3, withNullPrototype: true, withObjectString: true }) });

/** Deeply nested JSON text: arrays or objects, up to 200 000 levels. */
const deepJson = fc
  .tuple(fc.constantFrom(100, 1_000, 10_000, 200_000), fc.boolean())
  .map(([depth, arrays]) => (arrays ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`));

/** A webhook body close to valid, with any field swapped for something hostile. */
const webhookBody = fc.record(
  {
    id: fc.oneof({ weight: 4, arbitrary: fc.constant(UNIQUE) }, { weight: 1, arbitrary: wild }),
    conversation: fc.oneof({ weight: 4, arbitrary: fc.constant(UNIQUE) }, { weight: 1, arbitrary: wild }),
    sender: fc.oneof({ weight: 4, arbitrary: fc.record({ id: fc.oneof(fc.constant('ann'), hostileString), name: fc.option(hostileString, { nil: undefined }) }, { requiredKeys: ['id'] }) }, { weight: 1, arbitrary: wild }),
    text: fc.oneof({ weight: 3, arbitrary: fc.constant('hello') }, { weight: 3, arbitrary: hostileString }, { weight: 1, arbitrary: hugeString }, { weight: 1, arbitrary: wild }),
    attachments: fc.oneof(fc.array(fc.record({ kind: fc.constantFrom('image', 'file', 'audio', 'x'), url: fc.oneof(fc.webUrl(), hostileString) }, { requiredKeys: [] }), { maxLength: 40 }), wild),
    metadata: fc.oneof(fc.dictionary(hostileKey, anyJson, { maxKeys: 8 }), wild),
    group: fc.oneof(fc.boolean(), wild),
  },
  { requiredKeys: [] },
);

/** A Telegram message close to valid. */
const telegramMessage = fc.record(
  {
    message_id: fc.oneof({ weight: 4, arbitrary: fc.nat() }, { weight: 1, arbitrary: wild }),
    from: fc.oneof(fc.record({ id: fc.oneof(fc.constant(UNIQUE_INT), fc.integer()), is_bot: fc.boolean(), first_name: hostileString, username: hostileString }, { requiredKeys: ['id'] }), wild),
    chat: fc.oneof(
      { weight: 4, arbitrary: fc.record({ id: fc.constant(UNIQUE_INT), type: fc.constantFrom('private', 'group', 'supergroup', 'channel'), is_forum: fc.boolean(), title: hostileString }, { requiredKeys: ['id', 'type'] }) },
      { weight: 1, arbitrary: wild },
    ),
    date: fc.oneof(fc.integer(), wild),
    text: fc.oneof({ weight: 3, arbitrary: fc.constant('hello @steer_test_bot') }, { weight: 3, arbitrary: hostileString }, { weight: 1, arbitrary: hugeString }, { weight: 1, arbitrary: wild }),
    entities: fc.oneof(fc.array(fc.record({ type: fc.constantFrom('mention', 'bot_command', 'text_mention', 'url', 'x'), offset: fc.integer({ min: -5, max: 1_000_000 }), length: fc.integer({ min: -5, max: 1_000_000 }) }), { maxLength: 20 }), wild),
    message_thread_id: fc.oneof(fc.integer(), wild),
    is_topic_message: fc.oneof(fc.boolean(), wild),
    caption: hostileString,
    photo: fc.oneof(fc.array(fc.record({ file_id: hostileString, width: fc.integer(), height: fc.integer(), file_size: fc.integer() }), { maxLength: 5 }), wild),
    document: fc.oneof(fc.record({ file_id: hostileString, file_name: hostileString, mime_type: hostileString, file_size: fc.integer() }), wild),
    reply_to_message: fc.oneof(fc.record({ message_id: fc.integer(), text: hostileString, from: fc.record({ id: fc.integer(), is_bot: fc.boolean() }) }), wild),
  },
  { requiredKeys: [] },
);

const telegramUpdate = fc.record(
  {
    update_id: fc.oneof({ weight: 5, arbitrary: fc.constant(UNIQUE_INT) }, { weight: 1, arbitrary: wild }),
    message: fc.oneof({ weight: 5, arbitrary: telegramMessage }, { weight: 1, arbitrary: wild }),
    edited_message: telegramMessage,
    callback_query: wild,
    my_chat_member: wild,
  },
  { requiredKeys: [] },
);

/** Serializes a body, giving each placeholder a fresh unique value. */
function serialize(value: unknown, fresh: () => number): string {
  return JSON.stringify(value, (_k, v: unknown) => (v === UNIQUE ? `f${fresh()}` : v === UNIQUE_INT ? 9_000_000_000 + fresh() : v)) ?? 'null';
}

/** Raw JSON text with `__proto__` / `constructor` keys and duplicate keys around an otherwise fine body. */
const protoText = (base: fc.Arbitrary<unknown>) =>
  fc.tuple(base, anyJson, fc.constantFrom('__proto__', 'constructor', 'prototype'), fc.boolean()).map(([body, evil, key, duplicate]) => ({ body, evil, key, duplicate }));

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
          return Buffer.from(`{${JSON.stringify(key)}:${JSON.stringify(evil)}${inner ? `,${inner}` : ''}${dup},"__proto__":{"text":"polluted","isAdmin":true}}`);
        },
      })),
    },
    { weight: 1, arbitrary: fc.constantFrom('', '{', 'null', '[]', '""', '0', 'true', '{"a":1}{"b":2}', '\u0000', '\ufeff{}').map((t) => ({ kind: 'edge-text', make: () => Buffer.from(t) })) },
  ];
}

/** `count` cases for `target`, reproducible from `seed`. Unique ids are numbered from `firstId`. */
export function fuzzCases(target: FuzzCase['target'], count: number, seed: number, firstId: number): FuzzCase[] {
  let next = firstId;
  const fresh = () => next++;
  const arb = fc.tuple(fc.oneof(...shapes(target)), fc.constantFrom<FuzzCase['auth']>('good', 'good', 'good', 'good', 'good', 'good', 'good', 'good', 'bad', 'none'), fc.option(hostileString, { nil: undefined, freq: 10 }));
  return fc.sample(arb, { seed, numRuns: count }).map(([shape, auth, idempotencyKey]) => ({
    target,
    kind: shape.kind,
    body: shape.make(fresh),
    auth,
    ...(target === 'webhook' && idempotencyKey !== undefined && { idempotencyKey }),
  }));
}
