/** Chaos: runner processes killed with `kill -9` under steady load, the `collect` agent (see harness/runner-kill.ts). */
import { runnerKillSuite } from './harness/runner-kill.js';

runnerKillSuite({ mode: 'collect', steering: false, parts: 2, conversations: 40, inFlight: 6 });
