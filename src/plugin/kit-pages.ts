/**
 * The plugin kit's browser pages (`pages` in `steerbot/plugin`), for a
 * channel that serves a page of its own (the web chat): who may open it
 * (`PageGuard`, `checkAccess`), serving it with the host's security headers
 * (`servePage`, `pageHead`, `assetRoute`) and refusing a cross-site write
 * (`sameOriginJson`).
 */

export { type AccessVerdict, checkAccess, type PageAccess, type PageGuard, sameOriginJson, servePage } from '../http/access.js';
export { assetRoute, pageHead } from '../http/page-shell.js';
