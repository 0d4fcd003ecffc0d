/**
 * Whether a mail's From is vouched for by the receiving server (pure). A
 * From header is whatever the sender wrote; what a mailbox can trust is the
 * `Authentication-Results` header (RFC 8601) its own receiving server adds
 * after checking DKIM and SPF, and only one naming that server's
 * authserv-id: anyone can write such a header into a mail, so one from
 * another authserv-id says nothing. Only the topmost header naming that id
 * is read: the receiving server adds its own above every header the mail
 * came with (RFC 8601 §5), so one below it bearing the same id was written
 * before the mail reached it — by the sender, when the server does not
 * remove such headers as it should.
 *
 * A mail passes when a trusted header says `dkim=pass` with a signing domain
 * (`header.d`) that is the From domain or a parent of it, or `spf=pass` with
 * an envelope sender (`smtp.mailfrom`) in the From domain or a subdomain of
 * it, or `dmarc=pass` for the From domain (`header.from`).
 */

/** One `method=result` of an Authentication-Results header with its properties (`header.d`, `smtp.mailfrom`, …), lower-cased. */
export interface AuthResult {
  method: string;
  result: string;
  props: Record<string, string>;
}

/** One parsed Authentication-Results header. */
export interface AuthResultsHeader {
  authServId: string;
  results: AuthResult[];
}

/** Drops RFC 5322 comments `( … )`, one level of nesting. */
const withoutComments = (s: string): string => s.replace(/\((?:[^()]|\([^()]*\))*\)/g, ' ');
const unquote = (s: string): string => (s.startsWith('"') && s.endsWith('"') && s.length >= 2 ? s.slice(1, -1) : s);

/** Parses one header value (unfolded); undefined when it names no authserv-id. */
export function parseAuthResults(value: string): AuthResultsHeader | undefined {
  const [head, ...rest] = withoutComments(value.replace(/\r?\n[ \t]+/g, ' ')).split(';');
  const authServId = head?.trim().split(/\s+/)[0]?.toLowerCase();
  if (!authServId) return undefined;
  const results: AuthResult[] = [];
  for (const clause of rest) {
    const tokens = clause.trim().split(/\s+/).filter(Boolean);
    const first = tokens[0]?.match(/^([A-Za-z0-9_-]+)(?:\/\d+)?=([A-Za-z0-9_-]+)$/);
    if (!first) continue;
    const props: Record<string, string> = {};
    for (const t of tokens.slice(1)) {
      const m = t.match(/^([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)=(.+)$/);
      if (m) props[m[1]!.toLowerCase()] = unquote(m[2]!).toLowerCase();
    }
    results.push({ method: first[1]!.toLowerCase(), result: first[2]!.toLowerCase(), props });
  }
  return { authServId, results };
}

/** The domain of an address or domain (`user@d`, `@d`, `d`), lower-cased. */
const domainOf = (s: string): string => s.slice(s.lastIndexOf('@') + 1).toLowerCase();
/** `sub` is `parent` or under it. */
const within = (sub: string, parent: string): boolean => parent !== '' && (sub === parent || sub.endsWith(`.${parent}`));

function vouches(r: AuthResult, fromDomain: string): boolean {
  if (r.result !== 'pass') return false;
  if (r.method === 'dkim') {
    const d = r.props['header.d'] ?? (r.props['header.i'] ? domainOf(r.props['header.i']) : undefined);
    return d !== undefined && within(fromDomain, d);
  }
  if (r.method === 'spf') {
    const mailfrom = r.props['smtp.mailfrom'];
    return mailfrom !== undefined && within(domainOf(mailfrom), fromDomain);
  }
  if (r.method === 'dmarc') return r.props['header.from'] !== undefined && domainOf(r.props['header.from']) === fromDomain;
  return false;
}

/** Why a mail's From was not believed, or undefined when it was. */
export type AuthVerdict = undefined | 'no-trusted-header' | 'not-passed';

/** The topmost `Authentication-Results` of `authServId` among the header values (topmost first); the only one believed. */
function trustedResults(headerValues: readonly string[], authServId: string): AuthResultsHeader | undefined {
  const id = authServId.toLowerCase();
  return headerValues.map(parseAuthResults).find((h) => h?.authServId === id);
}

/**
 * Checks the From address `from` against the mail's `Authentication-Results`
 * header values, in the order they appear in the mail (topmost first): the
 * first one of `authServId` decides, any below it counts for nothing.
 * Undefined: vouched for.
 */
export function checkSender(headerValues: readonly string[], authServId: string, from: string): AuthVerdict {
  const own = trustedResults(headerValues, authServId);
  if (own === undefined) return 'no-trusted-header';
  const fromDomain = domainOf(from);
  return own.results.some((r) => vouches(r, fromDomain)) ? undefined : 'not-passed';
}

/** What a `DKIM-Signature` says it covers: its signing domain, the headers of `h=` (lower-cased, in order) and `b=`. */
interface SignatureTags {
  d: string;
  h: string[];
  b: string;
}

/** Reads the tags of one `DKIM-Signature` value (RFC 6376 §3.5); white space inside a tag's value is folding. */
function signatureTags(value: string): SignatureTags {
  const tags = new Map<string, string>();
  for (const part of value.split(';')) {
    const at = part.indexOf('=');
    if (at > 0) tags.set(part.slice(0, at).trim().toLowerCase(), part.slice(at + 1).replace(/\s+/g, ''));
  }
  return { d: (tags.get('d') ?? '').toLowerCase(), h: (tags.get('h') ?? '').toLowerCase().split(':'), b: tags.get('b') ?? '' };
}

/**
 * Whether the mail's sender, not whoever handed it over, named the bot in
 * the `To` or `Cc` `named` lists. A signed mail can be sent again from
 * anywhere with its DKIM (and so DMARC) pass intact, and a signature covers
 * only the headers its `h=` lists, each as many times as it lists it, from
 * the bottom (Microsoft 365 lists no `To` or `Cc`; a `To` added above a
 * signed one is covered by no signer). So: an `spf=pass` for the From domain
 * (the domain's own server handed the mail over) vouches for the whole mail;
 * else every `DKIM-Signature` of a passing domain (those `header.b` names,
 * when it names one: anyone can add a signature that claims to cover more)
 * must cover every instance of a header that names the bot. Headers by
 * lower-cased name, every instance.
 */
export function checkRecipient(headers: ReadonlyMap<string, readonly string[]>, authServId: string, from: string, named: readonly ('to' | 'cc')[]): boolean {
  const own = trustedResults(headers.get('authentication-results') ?? [], authServId);
  if (own === undefined) return false;
  const fromDomain = domainOf(from);
  if (own.results.some((r) => r.method === 'spf' && vouches(r, fromDomain))) return true;
  const signatures = (headers.get('dkim-signature') ?? []).map(signatureTags);
  const covers = (s: SignatureTags) => named.some((name) => s.h.filter((h) => h === name).length >= (headers.get(name)?.length ?? 0));
  return own.results.some((r) => {
    if (r.method !== 'dkim' || !vouches(r, fromDomain)) return false;
    const d = r.props['header.d'];
    const b = r.props['header.b'];
    const theirs = signatures.filter(
      (s) => (d !== undefined ? s.d === d : within(domainOf(r.props['header.i'] ?? ''), s.d)) && (b === undefined || s.b.toLowerCase().startsWith(b)),
    );
    return theirs.length > 0 && theirs.every(covers);
  });
}
