/**
 * The run endpoints an external agent calls back on, served by the runner's
 * HTTP server: `POST /http-agent/runs/:runId/steering`. Each invocation gets
 * a capability (this URL plus a random bearer token) that is good only while
 * that invocation runs in this process: an ended invocation, a stale token
 * (an earlier invocation of the run) or a run this runner lost is refused
 * with a status that says which.
 */

import { type HttpRoute, json, parseJson, type RouteRequest, type RouteResponse, RunEndedError, StaleRunError, sameToken } from 'steerbot/plugin';
import { type AgentInvocation, InvocationEndedError } from './invocation.js';
import { pullBodySchema } from './protocol.js';

/** Path prefix of the run endpoints. */
export const RUNS_PATH = '/http-agent/runs';

const BEARER_RE = /^Bearer ([A-Za-z0-9_-]{16,128})$/;

const refuse = (status: number, code: string, error: string): RouteResponse => json(status, { error, code });

/** The invocations running in this process, by run id, and the routes that reach them. */
export class RunEndpoints {
  private readonly live = new Map<string, AgentInvocation>();

  /** The base URL of a run's endpoints under `baseUrl` (the server's public address). */
  static urlOf(baseUrl: string, runId: string): string {
    return `${baseUrl.replace(/\/+$/, '')}${RUNS_PATH}/${encodeURIComponent(runId)}`;
  }

  /** Makes `invocation` reachable until the returned function is called. */
  open(runId: string, invocation: AgentInvocation): () => void {
    this.live.set(runId, invocation);
    return () => {
      if (this.live.get(runId) === invocation) this.live.delete(runId);
    };
  }

  /** The routes to serve. */
  routes(): HttpRoute[] {
    return [{ method: 'POST', path: `${RUNS_PATH}/:runId/steering`, bodyLimitBytes: 4096, handle: (req) => this.steering(req) }];
  }

  private async steering(req: RouteRequest): Promise<RouteResponse> {
    const auth = req.headers.authorization;
    const bearer = typeof auth === 'string' ? BEARER_RE.exec(auth) : null;
    if (!bearer) return refuse(401, 'unauthorized', 'expected Authorization: Bearer <capability token>');
    const invocation = this.live.get(req.params.runId ?? '');
    if (!invocation) return refuse(410, 'run-ended', 'no invocation of this run is active on this runner: it ended, or another runner took the run over');
    if (!sameToken(bearer[1]!, invocation.token))
      return refuse(409, 'stale-token', "stale token: not the current invocation's (a newer invocation of the run holds another one)");
    const raw = req.body.length === 0 ? { ok: true as const, value: {} } : parseJson(req.body.toString('utf8'));
    if (!raw.ok) return refuse(400, 'bad-request', raw.problem === 'invalid' ? 'the body is not JSON' : `the body is ${raw.message}`);
    const body = pullBodySchema.safeParse(raw.value);
    if (!body.success) {
      const issue = body.error.issues[0]!;
      return refuse(400, 'bad-request', `${issue.path.join('.') || 'body'}: ${issue.message}`);
    }
    try {
      const messages = await invocation.pull(body.data.mode, body.data.eventsSent);
      return json(200, { messages });
    } catch (err) {
      if (err instanceof InvocationEndedError) return refuse(410, 'run-ended', 'this invocation of the run has ended');
      if (err instanceof StaleRunError || err instanceof RunEndedError) return refuse(409, 'run-lost', 'this runner no longer owns the run');
      throw err;
    }
  }
}
