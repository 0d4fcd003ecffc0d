/**
 * A local fake of the Microsoft Teams platform as a bot sees it, for
 * end-to-end tests of the Teams channel (its `authorityEndpoint` and allowed
 * service URL hosts pointed here): an Entra-like authority with OpenID
 * metadata, a JWKS of a test RSA key and a client-credentials token endpoint
 * (`/<tenant>/…`), and Bot Connector endpoints under any region path
 * (`/<region>/v3/conversations/<id>/activities[/<activity id>]`) that check
 * the bearer token it issued, record every activity, keep message texts
 * with updates applied and the files messages carry (image attachments by
 * URL, card buttons that open one), refuse activities over 28 KB (413) and
 * can fail the next calls (429 with `Retry-After`, 5xx). It also builds activities as
 * Azure Bot Service sends them and POSTs them to the app with a signed token
 * (good, or forged, expired, for another audience).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '../wait.js';
import { readText, sendJson } from './http-io.js';
import { postJson } from './signed-post.js';
import { teamsMessageActivity } from './teams-activity.js';
import { signJwt, type TeamsSigningKey, teamsSigningKey } from './teams-auth.js';
import type { FakeTeams, TeamsCall, TeamsCallKind, TeamsFailure, TeamsSentActivity, TeamsSentFile } from './teams-types.js';

export { TEAMS_ALICE, TEAMS_BOB, type TeamsActivityOptions, teamsActivityId, teamsMessageActivity } from './teams-activity.js';
export type { TeamsTokenOptions } from './teams-auth.js';
export type { FakeTeams, TeamsCall, TeamsCallKind, TeamsFailure, TeamsSentActivity, TeamsSentFile } from './teams-types.js';

/** Test credentials of the app the fake knows. */
export const TEAMS_TEST = {
  appId: '00000000-0000-4000-8000-00000000a99d',
  appPassword: 'fake-teams-app-password-0123456789',
  tenantId: '11111111-1111-4111-8111-111111111111',
} as const;

/** The text a message shows: its `text`, else its Adaptive Card's TextBlocks and RichTextBlocks (their runs joined), one a line. */
function shownText(a: Record<string, any>): string {
  if (typeof a.text === 'string' && a.text !== '') return a.text;
  const body: Array<{ type: string; text?: string; inlines?: Array<{ text: string }> }> = a.attachments?.[0]?.content?.body ?? [];
  return body
    .flatMap((b) => (b.type === 'TextBlock' ? [b.text ?? ''] : b.type === 'RichTextBlock' ? [(b.inlines ?? []).map((r) => r.text).join('')] : []))
    .join('\n');
}

const buttonsOf = (a: Record<string, any>) =>
  ((a.attachments?.[0]?.content?.actions ?? []) as Array<{ type: string; title: string; data: unknown }>)
    .filter((x) => x.type === 'Action.Submit')
    .map((x) => ({ title: x.title, data: x.data }));

/** The files of a message: attachments by `contentUrl`, and the `Action.OpenUrl` buttons of its cards. */
function filesOf(s: TeamsSentActivity): TeamsSentFile[] {
  return ((s.activity.attachments ?? []) as Array<Record<string, any>>).flatMap((a): TeamsSentFile[] => {
    const base = { activityId: s.id, name: String(a.name ?? ''), contentType: String(a.contentType) };
    if (typeof a.contentUrl === 'string') return [{ ...base, kind: 'inline', url: a.contentUrl }];
    const opens = ((a.content?.actions ?? []) as Array<{ type: string; url: string; title: string }>).filter((x) => x.type === 'Action.OpenUrl');
    return opens.map((x) => ({ ...base, kind: 'link', url: x.url, title: x.title }));
  });
}

/** Most bytes of one activity Teams takes. */
const MAX_ACTIVITY_BYTES = 28 * 1024;
const CONNECTOR = /^\/([a-z0-9-]+)\/v3\/conversations\/([^/]+)\/activities(?:\/([^/]+))?$/;

/** Starts the fake on a random local port. */
export async function startFakeTeams(): Promise<FakeTeams> {
  const { tenantId, appId, appPassword } = TEAMS_TEST;
  const good: TeamsSigningKey = teamsSigningKey('fake-teams-key-1');
  const forged: TeamsSigningKey = teamsSigningKey('fake-teams-key-1');
  const issued = new Set<string>();
  const failures: Record<TeamsCallKind, TeamsFailure[]> = { send: [], typing: [], update: [], token: [] };
  let ids = 0;

  const fake: FakeTeams = {
    url: '',
    serviceUrl: (region = 'teams') => `${fake.url}/${region}/`,
    issuer: `https://sts.windows.net/${tenantId}/`,
    calls: [],
    sent: [],
    texts: (cid) => fake.sent.filter((s) => s.conversationId === cid && s.type === 'message').map((s) => s.text),
    files: (cid) => fake.sent.filter((s) => s.conversationId === cid && s.type === 'message').flatMap(filesOf),
    typingCount: (cid) => fake.sent.filter((s) => s.conversationId === cid && s.type === 'typing').length,
    failNext(kind, failure, n = 1) {
      for (let i = 0; i < n; i++) failures[kind].push(failure);
    },
    token(o = {}) {
      const now = Math.floor(Date.now() / 1000);
      const claims = {
        aud: o.audience ?? appId,
        iss: o.issuer ?? fake.issuer,
        tid: tenantId,
        appid: appId,
        nbf: now - 60,
        iat: now - 60,
        exp: now + (o.expiresInSeconds ?? 3600),
        ...(o.serviceUrl !== undefined && { serviceurl: o.serviceUrl }),
      };
      return signJwt(claims, o.wrongKey ? forged : good);
    },
    postActivity(url, activity, token) {
      const serviceUrl = (activity as { serviceUrl?: unknown }).serviceUrl;
      const bearer = token === undefined ? fake.token(typeof serviceUrl === 'string' ? { serviceUrl } : {}) : token;
      return postJson(url, activity, () => (bearer === null ? {} : { authorization: `Bearer ${bearer}` }));
    },
    message: (o) => teamsMessageActivity({ serviceUrl: fake.serviceUrl(), ...o }),
    waitUntil: (check, timeoutMs = 5000, what = 'condition') => waitFor(() => check(), timeoutMs, what),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const fail = (kind: TeamsCallKind, call: Omit<TeamsCall, 'status'>, res: ServerResponse): boolean => {
    const failure = failures[kind].shift();
    if (!failure) return false;
    fake.calls.push({ ...call, status: failure.status });
    const headers: Record<string, string> = failure.retryAfterSeconds !== undefined ? { 'retry-after': String(failure.retryAfterSeconds) } : {};
    sendJson(
      res,
      failure.status,
      { error: { code: failure.status === 429 ? 'TooManyRequests' : 'ServiceError', message: `error ${failure.status}` } },
      headers,
    );
    return true;
  };

  const identity = (path: string, req: IncomingMessage, raw: string, res: ServerResponse): boolean => {
    const base = `${fake.url}/${tenantId}`;
    if (req.method === 'GET' && path === `/${tenantId}/v2.0/.well-known/openid-configuration`) {
      sendJson(res, 200, {
        issuer: `${base}/v2.0`,
        jwks_uri: `${base}/discovery/v2.0/keys`,
        token_endpoint: `${base}/oauth2/v2.0/token`,
        id_token_signing_alg_values_supported: ['RS256'],
      });
    } else if (req.method === 'GET' && path === `/${tenantId}/discovery/v2.0/keys`) {
      sendJson(res, 200, { keys: [good.jwk] });
    } else if (req.method === 'POST' && path === `/${tenantId}/oauth2/v2.0/token`) {
      const form = new URLSearchParams(raw);
      const body = Object.fromEntries([...form.entries()].filter(([k]) => k !== 'client_secret'));
      if (fail('token', { kind: 'token', region: '', body }, res)) return true;
      const ok = form.get('grant_type') === 'client_credentials' && form.get('client_id') === appId && form.get('client_secret') === appPassword;
      fake.calls.push({ kind: 'token', region: '', body, status: ok ? 200 : 401 });
      if (!ok) sendJson(res, 401, { error: 'invalid_client' });
      else {
        const accessToken = randomBytes(24).toString('hex');
        issued.add(accessToken);
        sendJson(res, 200, { token_type: 'Bearer', expires_in: 3599, ext_expires_in: 3599, access_token: accessToken });
      }
    } else return false;
    return true;
  };

  const connector = (path: string, req: IncomingMessage, raw: string, res: ServerResponse) => {
    const m = CONNECTOR.exec(path);
    const kind: TeamsCallKind | undefined = !m ? undefined : req.method === 'POST' && !m[3] ? 'send' : req.method === 'PUT' && m[3] ? 'update' : undefined;
    if (!m || !kind) return sendJson(res, 404, { error: { code: 'NotFound', message: 'not found' } });
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!bearer || !issued.has(bearer)) return sendJson(res, 401, { message: 'Authorization has been denied for this request.' });
    const [, region, encoded, activityId] = m as unknown as [string, string, string, string | undefined];
    const conversationId = decodeURIComponent(encoded);
    let body: Record<string, any>;
    try {
      body = JSON.parse(raw);
    } catch {
      return sendJson(res, 400, { error: { code: 'BadArgument', message: 'not JSON' } });
    }
    const callKind: TeamsCallKind = kind === 'send' && body.type === 'typing' ? 'typing' : kind;
    const call = { kind: callKind, region, conversationId, body };
    if (fail(callKind, call, res)) return;
    if (Buffer.byteLength(raw) > MAX_ACTIVITY_BYTES) {
      fake.calls.push({ ...call, status: 413 });
      return sendJson(res, 413, { error: { code: 'MessageSizeTooBig', message: 'Message size too big' } });
    }
    const target = activityId === undefined ? undefined : fake.sent.find((s) => s.id === activityId && s.conversationId === conversationId);
    if (kind === 'update' && !target) {
      fake.calls.push({ ...call, status: 404 });
      return sendJson(res, 404, { error: { code: 'ActivityNotFound', message: 'activity not found' } });
    }
    fake.calls.push({ ...call, status: 200 });
    if (target) {
      Object.assign(target, { text: shownText(body), buttons: buttonsOf(body), activity: body });
      return sendJson(res, 200, { id: target.id });
    }
    const id = `1${String(Date.now()).slice(-9)}${String(++ids).padStart(3, '0')}`;
    fake.sent.push({ id, region, conversationId, type: String(body.type), text: shownText(body), buttons: buttonsOf(body), activity: body });
    sendJson(res, 201, { id });
  };

  const server = createServer(async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const raw = await readText(req);
    if (!identity(path, req, raw, res)) connector(path, req, raw, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
