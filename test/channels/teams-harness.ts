import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createTeamsPlugin, type TeamsConfigInput } from '../../plugins/teams/channel.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeTeams, TEAMS_TEST } from '../../testing/fakes/teams-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { hostChannel, runnerFor } from './system.js';

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

export async function startTeamsSystem(o: {
  h: RunnerHarness;
  teams: FakeTeams;
  agent: RunnerPlugin;
  config?: Partial<TeamsConfigInput>;
}): Promise<TeamsSystem> {
  const { h } = o;
  const { logger, redis } = h.ctx;
  const http = createHttpServer({ config: h.ctx.config, redis, logger });
  const plugin = createTeamsPlugin({ ...teamsTestConfig(o.teams), ...o.config }, { logger, redis, prefix: h.prefix });
  await hostChannel(h, http, plugin);
  const address = await listen(http, { host: '127.0.0.1', port: 0 });
  await runnerFor(h, o.agent, plugin);
  const url = `${address}/api/messages`;
  return { http, plugin, url, deliver: async (activity) => (await o.teams.postActivity(url, activity)).status };
}
