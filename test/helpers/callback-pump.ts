/** The teardown the webhook callback pump tests share. */
import type { Redis } from 'ioredis';
import type { CallbackPump } from '../../plugins/webhook/callbacks.js';
import type { HttpClient } from '../../src/http/client.js';
import type { CallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { cleanupPrefix } from './redis.js';

/** What a pump test started: its pump (if any), the HTTP client the pump posts with, the receiver, and where its keys are. */
export interface PumpParts {
  pump: CallbackPump | undefined;
  client: HttpClient;
  receiver: CallbackServer;
  redis: Redis;
  prefix: string;
}

/** Stops the pump first (nothing posts or writes after), then the client and the receiver, and drops the test's keys. */
export async function stopPumpParts(p: PumpParts): Promise<void> {
  await p.pump?.stop();
  p.client.close();
  await p.receiver.close();
  await cleanupPrefix(p.redis, p.prefix);
}
