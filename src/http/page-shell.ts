/**
 * What the built-in pages (the web chat, the console) share: the head of
 * their HTML shell and the answer serving their script and stylesheet.
 * Each page links only its own `<base>/app.css` and `<base>/app.js`, which
 * the page headers' CSP (`'self'` only) allows.
 */
import type { RouteResponse } from './routes.js';

/** The page up to and including `<body>`: charset, viewport, `title`, and the page's own stylesheet and script under `base`. */
export function pageHead(title: string, base: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="stylesheet" href="${base}/app.css">
<script src="${base}/app.js" defer></script>
</head>
<body data-base="${base}">
`;
}

/** A route handler answering a static asset (`type` is its content type); revalidated on each load, never sniffed. */
export function assetRoute(type: string, body: string): () => Promise<RouteResponse> {
  const res: RouteResponse = { status: 200, headers: { 'content-type': type, 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' }, body };
  return async () => res;
}
