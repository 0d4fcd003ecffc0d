/**
 * A stranger re-sends a person's signed mail to the bot as that person. A
 * DKIM signature covers only the headers its `h=` lists: Microsoft 365 signs
 * no `To` or `Cc`, and no signer covers a second `To` added above the one it
 * signed. So eve takes a mail alice sent her, names the bot in `To` (or adds
 * a `To` or a `Cc`), and sends it on from her own server: DKIM (and so DMARC)
 * still pass for alice's domain. Or she puts a `From` naming alice above the
 * signed `From` of her own mail from the same domain: a verifier checks the
 * bottommost `From`, a mail reader shows the topmost. The mail goes through the real email inbound
 * side into the real channel host, whose access rules answer alice only.
 */
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EmailInbound } from '../../plugins/email/inbound.js';
import { type IngestOnlyHost, ingestOnlyHost } from '../../testing/channel-host.js';
import { cleanupPrefix, testPrefix } from '../../testing/redis.js';
import { redisUrl } from '../helpers/redis.js';

const BOT = 'bot@example.test';
const ALICE = 'alice@corp.test';
const AUTHSERV = 'mx.example.test';
/** The start of alice's real signature's `b=`, which the receiving server names in `header.b`. */
const SIGNATURE_B = 'Qm9iU2lnbmVk';

let redis: Redis;
let prefix: string;
let system: IngestOnlyHost;
let uid = 0;

beforeEach(() => {
  redis = new Redis(redisUrl());
  prefix = testPrefix();
  const access = { channels: { email: { policy: 'allowlist', users: [ALICE] } } };
  system = ingestOnlyHost({ redis, prefix, logger: pino({ level: 'silent' }), access: () => access });
});

afterEach(async () => {
  await cleanupPrefix(redis, prefix);
  await redis.quit();
});

/** alice's signature over the headers `signed` names (as `h=` lists them), and the signing domain. */
const dkimSignature = (signed: string, b = `${SIGNATURE_B}AAAAsignature==`) =>
  `DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=corp.test; s=selector1;\r\n h=${signed};\r\n bh=Ym9keWhhc2g=; b=${b}`;

/** What the bot's receiving server says of a mail from alice's domain: `spf` is the envelope sender's check. */
const receivedAuth = (spf: string) =>
  `Authentication-Results: ${AUTHSERV}; dkim=pass header.d=corp.test header.s=selector1 header.b=${SIGNATURE_B}; ${spf}; dmarc=pass header.from=corp.test`;

/** One raw mail from `from` (alice), `headers` below the receiving server's `Authentication-Results`. */
function mail(id: string, auth: string, headers: string[], from = `Alice <${ALICE}>`): Buffer {
  return Buffer.from(
    [
      auth,
      ...headers,
      `From: ${from}`,
      'Subject: Refund',
      `Date: ${new Date().toUTCString()}`,
      `Message-ID: <${id}@corp.test>`,
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      'Please refund order 4711 to my new account.',
      '',
    ].join('\r\n'),
  );
}

/** Hands alice's mail `id` to the inbound side as the mailbox delivered it; returns the keys its conversation got. */
async function deliver(id: string, auth: string, headers: string[], from?: string): Promise<string[]> {
  const inbound = new EmailInbound({
    channelId: 'email',
    self: BOT,
    authServId: AUTHSERV,
    maxAttachmentBytes: 1024,
    redis,
    prefix,
    cursorKey: `${prefix}:p:email:cursor`,
    logger: pino({ level: 'silent' }),
  });
  uid += 1;
  await inbound.handle(system.host, { validity: '1', mails: [{ uid, source: mail(id, auth, headers, from) }], next: { validity: '1', uid } }, () => true);
  return (await redis.keys(`${prefix}:*`)).filter((k) => k.includes(`{c:email:${id}@corp.test}`));
}

/** Sent on from eve's own server: SPF passes for her envelope, not alice's domain. */
const fromEve = receivedAuth('spf=pass smtp.mailfrom=eve@attacker.test');

describe('a signed mail sent on to the bot as its signer', () => {
  it('is refused when the bot is named only in a To that the signature does not cover (Microsoft 365 signs no To)', async () => {
    const m365 = dkimSignature('From:Date:Subject:Message-ID:Content-Type:MIME-Version');
    expect(await deliver('r1', fromEve, [m365, `To: ${BOT}`])).toEqual([]);
    // The same signature, handed over by alice's own server (SPF passes for her domain), is alice writing.
    const direct = receivedAuth(`spf=pass smtp.mailfrom=${ALICE}`);
    expect(await deliver('d1', direct, [m365, `To: ${BOT}`])).toContainEqual(expect.stringMatching(/:log$/));
  });

  it('is refused when a To or Cc naming the bot was added above the signed To', async () => {
    const signed = dkimSignature('From:To:Subject:Date:Message-ID');
    expect(await deliver('r2', fromEve, [signed, `To: ${BOT}`, 'To: eve@attacker.test'])).toEqual([]);
    expect(await deliver('r3', fromEve, [signed, `Cc: ${BOT}`, 'To: eve@attacker.test'])).toEqual([]);
    // A signature that covers the one To there is, naming the bot, is alice's word for it.
    expect(await deliver('d2', fromEve, [signed, `To: ${BOT}`])).toContainEqual(expect.stringMatching(/:log$/));
  });

  it('is refused when eve adds a signature of her own that claims to cover the To, beside alice’s real one', async () => {
    const real = dkimSignature('From:Date:Subject:Message-ID');
    const fake = dkimSignature('From:To:To:Cc:Date:Subject:Message-ID', `${SIGNATURE_B}forged`);
    expect(await deliver('r4', fromEve, [fake, real, `To: ${BOT}`])).toEqual([]);
  });

  it('is refused when a From naming alice was added above the signed From of another address of her domain', async () => {
    // eve's own mail from her account at alice's employer, to the bot, signed by corp.test (From listed once, as most signers do).
    const signed = dkimSignature('From:To:Subject:Date:Message-ID');
    const eve = 'Eve <eve@corp.test>';
    expect(await deliver('r5', fromEve, [signed, `From: Alice <${ALICE}>`, `To: ${BOT}`], eve)).toEqual([]);
    // The same sent through her employer's own server (SPF passes for corp.test), which checks one From of the two.
    expect(await deliver('r6', receivedAuth('spf=pass smtp.mailfrom=eve@corp.test'), [`From: Alice <${ALICE}>`, `To: ${BOT}`], eve)).toEqual([]);
  });
});
