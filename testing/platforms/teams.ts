/** `steerbot/testing`'s `teams`: the fake of Microsoft Teams: Entra keys and tokens, the Bot Connector. */
export {
  type FakeTeams,
  startFakeTeams,
  TEAMS_ALICE,
  TEAMS_BOB,
  TEAMS_TEST,
  type TeamsActivityOptions,
  type TeamsCall,
  type TeamsCallKind,
  type TeamsFailure,
  type TeamsSentActivity,
  type TeamsSentFile,
  type TeamsTokenOptions,
  teamsActivityId,
  teamsMessageActivity,
} from '../fakes/teams-server.js';
