/**
 * The Teams channel wired end to end on a RunnerHarness: a host HTTP server
 * listening on a local port (tests post activities with signed tokens to
 * it), the real plugin (the real Agents SDK) against the fake Teams, the
 * real channel host enqueueing runs, and a runner with `agent` delivering
 * through the plugin.
 */
import { runnerFeatures } from '../../app/features/index.js';
import { createHttpServer, type HttpServer, listen, routeRegistry } from '../../host/http.js';
import { createChannelHost } from '../../host/receive.js';
import { createTeamsPlugin, type TeamsConfigInput } from '../../plugins/teams/channel.js';
import { startRunner } from '../../runner/main.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeTeams, TEAMS_TEST } from '../../testing/fakes/teams-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';

/** What `startTeamsSystem` started: stop `plugin`, then close `http`, when done. */
export interface TeamsSystem {
  http: HttpServer;
  plugin: ChannelPlugin;
  /** The messaging endpoint's URL. */
  url: string;
  /** POSTs an activity with a good token naming its serviceUrl; resolves with the status. */
  deliver(activity: Record<string, unknown>): Promise<number>;
}

/** The plugin settings of a test against `teams`. */
export const teamsTestConfig = (teams: FakeTeams): TeamsConfigInput => ({
  ...TEAMS_TEST,
  authorityEndpoint: teams.url,
  serviceUrl: teams.serviceUrl(),
  serviceUrlHosts: ['127.0.0.1'],
});

export async function startTeamsSystem(o: { h: RunnerHarness; teams: FakeTeams; agent: RunnerPlugin }): Promise<TeamsSystem> {
  const { h } = o;
  const { logger, redis } = h.ctx;
  const http = createHttpServer({ config: h.ctx.config, redis, logger });
  const plugin = createTeamsPlugin(teamsTestConfig(o.teams), { logger, redis, prefix: h.prefix });
  const host = createChannelHost({
    routes: routeRegistry(http),
    redis,
    prefix: h.prefix,
    logger,
    dispatch: h.dispatch,
    ingest: h.ingestService,
    enqueue: (c, r) => h.queue.enqueue(c, r),
    outbound: (id) => (id === plugin.id ? plugin.outbound : undefined),
    features: [],
  });
  await plugin.start(host);
  const address = await listen(http, { host: '127.0.0.1', port: 0 });
  const runner = await startRunner(h.ctx, {
    plugin: o.agent,
    resolveOutbound: (cid) => (cid.startsWith('teams:') ? plugin.outbound : undefined),
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  h.runners.push(runner);
  const url = `${address}/api/messages`;
  return { http, plugin, url, deliver: async (activity) => (await o.teams.postActivity(url, activity)).status };
}
