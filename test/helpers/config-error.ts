/** The ConfigError that reading a config with `env` throws (fails the test when it does not throw one). */
import { readConfig } from '../../app/config.js';
import { ConfigError } from '../../src/errors.js';

export function configErrorOf(env: Record<string, string>): ConfigError {
  try {
    readConfig({ env });
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}
