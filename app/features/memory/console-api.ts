/**
 * The console's memory API: an identity's notes (`GET
 * /console/api/memory?identity=…`), saving a new or edited note and deleting
 * one or all (POST). Bad bodies and refused notes (over a limit, unknown id)
 * get 400 and change nothing.
 */
import { z } from 'zod';
import type { ApiRoute } from '../../../host/feature.js';
import { InvalidInputError } from '../../../src/errors.js';
import { json, type RouteResponse, readJsonBody } from '../../../src/http/routes.js';
import type { MemoryStore } from '../../../src/people/memory.js';

const identity = z.string().min(3).max(257);
const noteId = z.string().regex(/^[1-9][0-9]{0,15}$/, { error: 'expected a note id (a number)' });
const OFF = { enabled: false, error: 'memory is turned off (memory.enabled)' };

/** Registers the memory routes under the console's API; `store` undefined: memory is off (GET says so, POST 409). */
export function registerMemoryApi(api: ApiRoute, store: MemoryStore | undefined): void {
  api('GET', '/memory', async (req) => {
    if (!store) return json(200, { enabled: false, notes: [] });
    const who = identity.safeParse(req.query.identity ?? '');
    if (!who.success) return json(400, { error: 'expected ?identity=<channel>:<user id>' });
    return guarded(async () =>
      json(200, {
        enabled: true,
        identity: who.data,
        notes: await store.list(who.data),
        limits: { maxNotes: store.limits.maxNotes, maxNoteChars: store.limits.maxNoteChars },
      }),
    );
  });
  api('POST', '/memory/save', async (req) => {
    if (!store) return json(409, OFF);
    const body = readJsonBody(req, z.strictObject({ identity, id: noteId.optional(), text: z.string().max(100_000) }));
    if (!body.ok) return body.response;
    const { id, text } = body.value;
    return guarded(async () => json(200, await store.save(body.value.identity, text, id === undefined ? {} : { id })));
  });
  api('POST', '/memory/delete', async (req) => {
    if (!store) return json(409, OFF);
    const body = readJsonBody(req, z.strictObject({ identity, id: noteId.optional() }));
    if (!body.ok) return body.response;
    const { id } = body.value;
    return guarded(async () =>
      id === undefined
        ? json(200, { deleted: await store.deleteAll(body.value.identity) })
        : (await store.delete(body.value.identity, id))
          ? json(200, { deleted: 1 })
          : json(404, { error: `no note ${id}` }),
    );
  });
}

/** A bad id or a refused note is the caller's mistake: 400, nothing written. */
async function guarded(run: () => Promise<RouteResponse>): Promise<RouteResponse> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof InvalidInputError) return json(400, { error: err.message, ...('code' in err && { code: err.code }) });
    throw err;
  }
}
