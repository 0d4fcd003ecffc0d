/**
 * The media repository of the fake Matrix homeserver: `POST
 * /_matrix/media/v3/upload` (the body is the file, `filename` in the query;
 * over the upload limit 413 `M_TOO_LARGE`), `GET
 * /_matrix/client/v1/media/config` (`m.upload.size` when a limit is set)
 * and the authenticated `GET /_matrix/client/v1/media/download/{server}/{mediaId}`.
 */
import { randomBytes } from 'node:crypto';

/** One file in the fake's media repository. */
export interface MatrixMedia {
  /** `mxc://<server>/<media id>`. */
  mxc: string;
  contentType: string;
  /** The `filename` an upload named. */
  filename?: string;
  data: Buffer;
}

/** What a media route answers: JSON, or a file's bytes. */
export type MediaAnswer = { status: number; json: unknown } | { status: number; file: MatrixMedia };

/** A media route the fake serves. */
export type MediaRoute = { kind: 'upload' } | { kind: 'media-config' } | { kind: 'download'; server: string; mediaId: string };

/** The media routes of `pathname`, or undefined. */
export function mediaRoute(method: string, pathname: string): MediaRoute | undefined {
  if (method === 'POST' && pathname === '/_matrix/media/v3/upload') return { kind: 'upload' };
  if (method === 'GET' && pathname === '/_matrix/client/v1/media/config') return { kind: 'media-config' };
  const m = /^\/_matrix\/client\/v1\/media\/download\/([^/]+)\/([^/]+)(?:\/[^/]+)?$/.exec(pathname);
  if (method === 'GET' && m) return { kind: 'download', server: decodeURIComponent(m[1]!), mediaId: decodeURIComponent(m[2]!) };
  return undefined;
}

/** The fake's media repository. */
export class MatrixMediaStore {
  /** Files the bot uploaded, in order (each upload, a repeated one too). */
  readonly uploads: MatrixMedia[] = [];
  /** Largest upload taken, in bytes; undefined: no limit, and the media config names none. */
  uploadLimit: number | undefined;
  private readonly files = new Map<string, MatrixMedia>();

  constructor(private readonly server: string) {}

  /** Puts a file in the repository as if a person uploaded it; returns its `mxc://` URI. */
  add(data: Buffer, contentType: string): string {
    const file = this.store(data, contentType, undefined);
    return file.mxc;
  }

  /** The file of an `mxc://` URI. */
  get(mxc: string): MatrixMedia | undefined {
    return this.files.get(mxc);
  }

  /** Answers a media route. */
  answer(route: MediaRoute, query: Record<string, string>, headers: Record<string, string | string[] | undefined>, raw: Buffer): MediaAnswer {
    if (route.kind === 'media-config') return { status: 200, json: this.uploadLimit === undefined ? {} : { 'm.upload.size': this.uploadLimit } };
    if (route.kind === 'upload') {
      if (this.uploadLimit !== undefined && raw.length > this.uploadLimit) return { status: 413, json: { errcode: 'M_TOO_LARGE', error: 'Upload too large' } };
      const file = this.store(raw, String(headers['content-type'] ?? 'application/octet-stream'), query.filename);
      this.uploads.push(file);
      return { status: 200, json: { content_uri: file.mxc } };
    }
    const file = this.files.get(`mxc://${route.server}/${route.mediaId}`);
    return file ? { status: 200, file } : { status: 404, json: { errcode: 'M_NOT_FOUND', error: 'Not found' } };
  }

  private store(data: Buffer, contentType: string, filename: string | undefined): MatrixMedia {
    const file: MatrixMedia = { mxc: `mxc://${this.server}/${randomBytes(12).toString('base64url')}`, contentType, data, ...(filename && { filename }) };
    this.files.set(file.mxc, file);
    return file;
  }
}
