/**
 * The plugin kit's request signatures (`signatures` in `steerbot/plugin`):
 * steerbot's own HMAC scheme for webhook bodies (`X-Steerbot-Signature` over
 * `X-Steerbot-Timestamp` and the raw body), signing (`sign`,
 * `signedHeaders`) and checking (`checkSignature`) alike.
 */

export { checkSignature, SIGNATURE_HEADER, sign, signedHeaders, TIMESTAMP_HEADER } from '../http/signature.js';
