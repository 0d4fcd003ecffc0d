/** Chaos: runner processes killed with `kill -9` under steady load, the `steer` agent (see harness/runner-kill.ts). */
import { runnerKillSuite } from './harness/runner-kill.js';

runnerKillSuite({ mode: 'steer', steering: true, parts: 1, conversations: 3, inFlight: 9 });
