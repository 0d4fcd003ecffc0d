/**
 * The console's export downloads (docs/people.md#export): a conversation's
 * (`GET /console/api/conversations/:id/export`) and a person's
 * (`GET /console/api/people/export?id=<identity or account>`), each one JSON
 * document streamed as an attachment. Behind the console's login like every
 * console route; since an export hands out a person's data, a request another
 * site's page made is refused too (403), and the response may not be embedded
 * or sniffed by another origin. Reads only.
 */

import type { Exporter, ExportOpening } from '../../src/export/exporter.js';
import { sameOriginRead } from '../../src/http/access.js';
import { json, type RouteRequest, type RouteResponse } from '../../src/http/routes.js';
import type { ApiRoute } from '../feature.js';
import { guarded } from './access-api.js';

/** Registers the export routes under the console's API. */
export function registerExportApi(api: ApiRoute, exporter: Exporter): void {
  api('GET', '/conversations/:id/export', (req) => download(req, `conversation ${req.params.id ?? ''}`, () => exporter.conversation(req.params.id ?? '')));
  api('GET', '/people/export', (req) => {
    const id = req.query.id?.trim() ?? '';
    if (id === '') return Promise.resolve(json(400, { error: 'id: expected an identity or account id (`<channel id>:<user id>`)' }));
    return download(req, `identity ${id}`, () => exporter.identity(id));
  });
}

/** The export as an attachment, or why there is none: 403 cross-site, 400 a bad id, 404 nothing stored. */
async function download(req: RouteRequest, what: string, open: () => Promise<ExportOpening>): Promise<RouteResponse> {
  if (!sameOriginRead(req)) return json(403, { error: 'an export is downloaded from the console itself, not from another site' });
  return guarded(async () => {
    const opening = await open();
    if (opening.kind === 'purged') return json(404, { error: `${what} was purged: nothing is stored for it` });
    if (opening.kind === 'not_found') return json(404, { error: `nothing is stored for ${what}` });
    return {
      status: 200,
      headers: {
        'content-type': 'application/json; charset=utf-8',
        'content-disposition': `attachment; filename="${exportFileName(opening.subject)}"`,
        'x-content-type-options': 'nosniff',
        'cross-origin-resource-policy': 'same-origin',
        'cache-control': 'no-store',
      },
      stream: opening.chunks,
    };
  });
}

/** `steerbot-export-<id>.json`, the id's characters outside `[A-Za-z0-9._-]` as `_` (a header value, a file name). */
function exportFileName(subject: string): string {
  return `steerbot-export-${subject.replace(/[^A-Za-z0-9._-]/g, '_')}.json`;
}
