/**
 * Schedule types of the runner contract (`schedules` in `steerbot/runner`):
 * what `RunContext.features.schedules` takes and lists, and `describeWhen` to show a
 * schedule's timing in words. One namespace: only a plugin that offers
 * schedule tools needs them, and it needs them together.
 */

export type { ListedSchedule } from '../src/schedules/schedules.js';
export { describeWhen, type MissedFires, type Schedule, type ScheduleOrigin, type ScheduleRequest, type ScheduleWhen } from '../src/schedules/spec.js';
