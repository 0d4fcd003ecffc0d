/** The console's schedules API: a conversation's schedules with their next fires, and cancelling one (409 when schedules are off). */
import type { ApiRoute } from '../../../host/feature.js';
import { json } from '../../../src/http/routes.js';
import type { Logger } from '../../../src/logger.js';
import type { Schedules } from '../../../src/schedules/schedules.js';

/** Registers the schedules routes under the console's API; `schedules` undefined: schedules are off. */
export function registerSchedulesApi(api: ApiRoute, schedules: Schedules | undefined, logger: Logger): void {
  api('GET', '/conversations/:id/schedules', async (req) => {
    const list = schedules ? await schedules.list(req.params.id ?? '', 3) : [];
    return json(200, { enabled: schedules !== undefined, schedules: list, now: Date.now() });
  });
  api('POST', '/conversations/:id/schedules/:schedule/cancel', async (req) => {
    if (!schedules) return json(409, { ok: false, message: 'schedules are turned off' });
    const cancelled = await schedules.cancel(req.params.id ?? '', req.params.schedule ?? '');
    logger.info({ conversationId: req.params.id, scheduleId: req.params.schedule, cancelled }, 'console: schedule cancel');
    return cancelled ? json(200, { ok: true, message: `Schedule ${req.params.schedule} cancelled.` }) : json(404, { ok: false, message: 'no such schedule' });
  });
}
