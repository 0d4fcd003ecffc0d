/**
 * A runner-only steerbot in its own process, for the http-agent takeover
 * test: `loadConfig` (STEERBOT_CONFIG + environment) and `startApp`, as
 * `steerbot start` does; prints `ready <address of its HTTP server>` and
 * runs until killed (SIGKILL: no cleanup, like a crash).
 */
import { loadConfig, startApp } from '../../app/index.js';

const config = await loadConfig({ env: process.env });
// Any free port (a config cannot ask for 0): the run endpoints' address is the one it listens at.
const app = await startApp({ config: { ...config, http: { ...config.http, port: 0 } } });
process.stdout.write(`ready ${app.probeAddress ?? app.address}\n`);
setInterval(() => undefined, 1 << 30);
