/** The built-in features' host parts, for a test that builds its channel host by hand (`createChannelHost`). */
import pino from 'pino';
import { readConfig } from '../../app/config.js';
import { FEATURES, hostFeatures } from '../../app/features/index.js';
import { schedulesHostOn } from '../../app/features/schedules/host.js';
import { AccessGate } from '../../host/access/gate.js';
import { accessAdmission } from '../../host/access/step.js';
import { AccessStore } from '../../host/access/store.js';
import { type CommandSet, commandSet } from '../../host/commands/index.js';
import type { HostFeature } from '../../host/feature.js';
import { makeHostFeatures } from '../../host/main.js';
import { hostPurge, type Purge, type PurgeRequest } from '../../host/purge.js';
import type { CoreConfig } from '../../src/config/load.js';
import type { Logger } from '../../src/logger.js';
import { IdentityStore } from '../../src/people/identity.js';
import { dispatchFromConfig } from '../../src/protocol/dispatch-config.js';
import type { ConfiguredSchedules } from '../../src/schedules/from-config.js';
import { HeartbeatKeeper } from '../../src/schedules/heartbeats.js';
import type { Schedules } from '../../src/schedules/schedules.js';
import type { RedisClient } from '../../src/scripts/index.js';

/** What the features are made from; the rest as a host makes it. */
export interface TestFeatureOptions {
  /** Default: the configuration of an empty environment. */
  config?: CoreConfig;
  redis: RedisClient;
  prefix: string;
  /** Default: silent. */
  logger?: Logger;
  /** Default: a store on `redis`. */
  identities?: IdentityStore;
  /** Default: the gate of `config.access`. */
  access?: AccessGate;
  /** Default: none (schedules off). */
  schedules?: ConfiguredSchedules;
}

/** The host's access step and every built-in feature's host part, as `startHost` makes them. */
export async function testHostFeatures(o: TestFeatureOptions): Promise<HostFeature[]> {
  const config = o.config ?? readConfig({ env: {} });
  const logger = o.logger ?? pino({ level: 'silent' });
  const identities = o.identities ?? new IdentityStore({ redis: o.redis, prefix: o.prefix });
  const access = o.access ?? new AccessGate(config.access, new AccessStore(o.redis, o.prefix, config.access, identities), logger);
  const connectRedis = () => {
    throw new Error('the test host opens no connections: schedules are given (TestFeatureOptions.schedules)');
  };
  // The host's purge with every feature's hooks, as host/main.ts binds it once the features are made.
  let purge: Purge = () => Promise.reject(new Error('the test host purges once its features are made'));
  const kit = {
    config,
    logger,
    redis: o.redis,
    prefix: o.prefix,
    identities,
    channelIds: [],
    connectRedis,
    purge: (id: string, r?: PurgeRequest) => purge(id, r),
  };
  // The schedules feature on the test's service (or off), not on one it would open itself.
  const features = FEATURES.map((f) => (f.name === 'schedules' ? { ...f, host: () => schedulesHostOn(kit, o.schedules) } : f));
  const made = [accessAdmission(access), ...(await makeHostFeatures(kit, hostFeatures(features)))];
  purge = hostPurge(dispatchFromConfig(config, o.redis, false).options, made);
  return made;
}

/** The command set of a host with every built-in feature. */
export async function builtinCommands(o: TestFeatureOptions): Promise<CommandSet> {
  const features = await testHostFeatures(o);
  return commandSet(features.flatMap((f) => (f.commands ? [f.commands] : [])));
}

/** The schedules feature's host part on `schedules` (undefined: schedules off), without heartbeats. */
export function testSchedulesFeature(schedules: Schedules | undefined): HostFeature {
  const scheduling = schedules && { schedules, heartbeats: new HeartbeatKeeper(schedules, {}, []), close: async () => undefined };
  return schedulesHostOn({ config: readConfig({ env: {} }), logger: pino({ level: 'silent' }) }, scheduling);
}
