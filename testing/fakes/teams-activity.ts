/** Activities as Azure Bot Service POSTs them to a Teams bot's messaging endpoint, for tests. */
import { randomBytes } from 'node:crypto';

/** A Teams user: `29:`-prefixed id, display name. */
export const TEAMS_ALICE = { id: '29:1alice0000000000000000000000000000000000', name: 'Alice Liddell' } as const;
/** Another Teams user. */
export const TEAMS_BOB = { id: '29:1bob00000000000000000000000000000000000000', name: 'Bob Bates' } as const;

/** A fresh activity id in Teams' shape (13 digits, like a ms timestamp). */
export const teamsActivityId = (): string =>
  `1${BigInt(`0x${randomBytes(6).toString('hex')}`)
    .toString()
    .padStart(12, '0')
    .slice(0, 12)}`;

/** Options of `teamsMessageActivity`. */
export interface TeamsActivityOptions {
  /** The conversation id. Default: a personal chat `a:1` + the sender's id tail. */
  conversationId?: string;
  /** `personal`, `groupChat` or `channel`. Default `personal`. */
  conversationType?: 'personal' | 'groupChat' | 'channel';
  /** The message text. Default `hello`. */
  text?: string;
  /** The sender. Default `TEAMS_ALICE`. */
  from?: { id: string; name?: string };
  /** Default: a fresh one. */
  id?: string;
  /** The service URL replies go to. */
  serviceUrl?: string;
  /** `value`: the data of an Adaptive Card `Action.Submit` click. */
  value?: unknown;
  /** The message this one answers (a click: the card's activity id). */
  replyToId?: string;
  /** The activity type. Default `message`. */
  type?: string;
}

/** A message activity from a user to the bot. */
export function teamsMessageActivity(o: TeamsActivityOptions): Record<string, any> {
  const from = o.from ?? TEAMS_ALICE;
  const tenantId = '11111111-1111-4111-8111-111111111111';
  return {
    type: o.type ?? 'message',
    id: o.id ?? teamsActivityId(),
    timestamp: new Date().toISOString(),
    serviceUrl: o.serviceUrl ?? 'https://smba.trafficmanager.net/teams/',
    channelId: 'msteams',
    from: { ...from, aadObjectId: '22222222-2222-4222-8222-222222222222' },
    conversation: { id: o.conversationId ?? `a:1${from.id.slice(4, 20)}`, conversationType: o.conversationType ?? 'personal', tenantId },
    recipient: { id: '28:00000000-0000-4000-8000-00000000a99d', name: 'steerbot' },
    ...(o.value === undefined ? { text: o.text ?? 'hello', textFormat: 'plain' } : { value: o.value }),
    ...(o.replyToId !== undefined && { replyToId: o.replyToId }),
    locale: 'en-US',
    channelData: { tenant: { id: tenantId } },
  };
}
