/**
 * Request signing of the webhook channel: `X-Steerbot-Signature:
 * sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>` with the unix
 * time in seconds in `X-Steerbot-Timestamp`. Callbacks are signed the same way.
 * The code lives in `src/http/signature.ts`: the http-agent runner signs its agent requests with it too.
 */
import { signatures } from 'steerbot/plugin';

export const { checkSignature, sign, signedHeaders } = signatures;
