import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createTeamsPlugin, type TeamsConfigInput } from '../../plugins/teams/channel.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeTeams, TEAMS_TEST, type TeamsTokenOptions } from '../../testing/fakes/teams-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { hostChannel, runnerFor } from './system.js';

/** What `startTeamsSystem` started: stop `plugin`, then close `http`, when done. */
export interface TeamsSystem {
  http: HttpServer;
  plugin: ChannelPlugin;
  /** The messaging endpoint's URL. */
  url: string;
  /** POSTs an activity with a good Bot Service token naming its serviceUrl; resolves with the status. */
  deliver(activity: Record<string, unknown>): Promise<number>;
}

/** The issuer of the tokens Bot Service sends activities with. */
export const BOT_SERVICE_ISSUER = 'https://api.botframework.com';

/** A token as Bot Service signs it for an activity on `serviceUrl` (signed by the fake's published key); `over` changes it. */
export const botServiceToken = (teams: FakeTeams, serviceUrl: string, over: TeamsTokenOptions = {}): string =>
  teams.token({ issuer: BOT_SERVICE_ISSUER, serviceUrl, ...over });

/** POSTs `activity` to `url` as Bot Service does (a good token naming its serviceUrl), or with `token`. */
export const postActivity = (teams: FakeTeams, url: string, activity: Record<string, unknown>, token?: string | null) =>
  teams.postActivity(url, activity, token === undefined ? botServiceToken(teams, String(activity.serviceUrl)) : token);

/** The plugin settings of a test against `teams`: its key set stands in for Bot Service's. */
export const teamsTestConfig = (teams: FakeTeams): TeamsConfigInput => ({
  ...TEAMS_TEST,
  authorityEndpoint: teams.url,
  botFrameworkKeysUrl: `${teams.url}/${TEAMS_TEST.tenantId}/discovery/v2.0/keys`,
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
  return { http, plugin, url, deliver: async (activity) => (await postActivity(o.teams, url, activity)).status };
}
