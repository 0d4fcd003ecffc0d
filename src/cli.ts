/**
 * `npm start`: load the configuration, start the process, stop cleanly on
 * SIGINT / SIGTERM. Exit codes: 0 stopped cleanly, 1 failed, 2 bad configuration.
 */
import { startApp, type RunningApp } from './app.js';
import { loadConfig, type SteerbotConfig } from './config.js';
import { ConfigError } from './errors.js';
import { createLogger } from './logger.js';

function readConfig(): SteerbotConfig {
  try {
    return loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`steerbot: ${err.message}\n`);
    process.exit(2);
  }
}

async function main(): Promise<void> {
  const config = readConfig();
  const logger = createLogger({ level: config.log.level });
  let app: RunningApp;
  try {
    app = await startApp({ config, logger });
  } catch (err) {
    logger.fatal({ err }, 'steerbot failed to start');
    process.exit(1);
  }

  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    app.stop().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

await main();
