/** `steerbot/testing`'s `slack`: the fake of the Slack Web API and Socket Mode. */
export {
  blockActions as slackBlockActions,
  eventCallback as slackEventCallback,
  FakeSlack,
  type FakeSlackOptions,
  SLACK_APP_TOKEN,
  SLACK_BOT_TOKEN,
  SLACK_BOT_USER,
  SLACK_SIGNING_SECRET,
  type SlackApiCall,
  type SlackFailure,
  type SlackFakeFile,
  type SlackMessageInput,
  type SlackPostedMessage,
  type SlackUploadedFile,
  signedSlackHeaders,
  startFakeSlack,
} from '../fakes/slack-server.js';
