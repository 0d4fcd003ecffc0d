/**
 * SMTP and IMAP failures → typed errors. nodemailer names an SMTP reply's
 * code in `responseCode`: 4xx is a passing refusal (greylisting, a full
 * queue) and becomes status 503, which delivery retries with backoff; 5xx is
 * final and becomes status 422, which delivery does not retry. No answer at
 * all (refused connection, timeout) is passing too. Passwords are removed
 * from every message.
 */
import { ChannelApiError, redactSecrets } from 'steerbot/plugin';

/** An SMTP submission or IMAP call failed. `smtpCode`: the server's reply code when it gave one (450, 550, …). */
export class EmailApiError extends ChannelApiError {
  readonly smtpCode: number | undefined;
  constructor(message: string, opts: { status?: number; smtpCode?: number; cause?: unknown } = {}) {
    super(message, opts);
    this.smtpCode = opts.smtpCode;
  }
}

/** The status delivery reads for an SMTP reply code: 4xx → 503 (retried), 5xx → 422 (final), none → 503. */
export function statusOfSmtpCode(code: number | undefined): number {
  return code !== undefined && code >= 500 && code < 600 ? 422 : 503;
}

/** The error of a failed SMTP submission (a nodemailer error). */
export function smtpError(err: unknown, secrets: readonly string[]): EmailApiError {
  const e = (typeof err === 'object' && err !== null ? err : {}) as { responseCode?: unknown; response?: unknown; code?: unknown; message?: unknown };
  const smtpCode = typeof e.responseCode === 'number' ? e.responseCode : undefined;
  const reply = typeof e.response === 'string' ? e.response : typeof e.message === 'string' ? e.message : String(err);
  const kind = smtpCode === undefined ? 'no answer' : smtpCode >= 500 ? 'refused' : 'deferred';
  const message = redactSecrets(`email send ${kind}: ${reply}`.slice(0, 500), ...secrets);
  return new EmailApiError(message, { status: statusOfSmtpCode(smtpCode), ...(smtpCode !== undefined && { smtpCode }) });
}

/** The error of a failed IMAP call (connect, login, fetch, download). */
export function imapError(what: string, err: unknown, secrets: readonly string[]): EmailApiError {
  const e = (typeof err === 'object' && err !== null ? err : {}) as { responseText?: unknown; message?: unknown; authenticationFailed?: unknown };
  const text = typeof e.responseText === 'string' ? e.responseText : typeof e.message === 'string' ? e.message : String(err);
  return new EmailApiError(redactSecrets(`email imap ${what} failed: ${text}`.slice(0, 500), ...secrets), {
    status: e.authenticationFailed === true ? 401 : 503,
  });
}
