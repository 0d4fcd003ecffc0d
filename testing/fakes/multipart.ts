/**
 * A small multipart/form-data reader for the fake platform servers: enough
 * for what the real clients send (grammY's uploads, discord.js and Slack
 * file parts, WhatsApp media uploads), not a general parser.
 */

/** One part of a multipart body. */
export interface MultipartPart {
  name: string;
  /** Set on a file part. */
  filename?: string;
  contentType?: string;
  data: Buffer;
}

/** The boundary of a `multipart/form-data` content type, or undefined for any other. */
export function multipartBoundary(contentType: string | undefined): string | undefined {
  const m = /^multipart\/form-data;.*boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType ?? '');
  return m ? (m[1] ?? m[2])!.trim() : undefined;
}

/** The parts of `body`, in order. */
export function parseMultipart(body: Buffer, boundary: string): MultipartPart[] {
  const delimiter = Buffer.from(`--${boundary}`);
  const parts: MultipartPart[] = [];
  let start = body.indexOf(delimiter);
  while (start >= 0) {
    const from = start + delimiter.length;
    if (body.subarray(from, from + 2).toString() === '--') break;
    const next = body.indexOf(delimiter, from);
    if (next < 0) break;
    // The part sits between the delimiter's CRLF and the CRLF before the next delimiter.
    const raw = body.subarray(from + 2, next - 2);
    const split = raw.indexOf('\r\n\r\n');
    const head = raw.subarray(0, split).toString('utf8');
    const disposition = /content-disposition:\s*form-data;([^\r\n]*)/i.exec(head)?.[1] ?? '';
    const name = /\bname="([^"]*)"/i.exec(disposition)?.[1] ?? '';
    const filename = /\bfilename=(?:"([^"]*)"|([^;\r\n]*))/i.exec(disposition);
    const contentType = /content-type:\s*([^\r\n]+)/i.exec(head)?.[1]?.trim();
    parts.push({
      name,
      ...(filename && { filename: (filename[1] ?? filename[2] ?? '').trim() }),
      ...(contentType && { contentType }),
      data: Buffer.from(raw.subarray(split + 4)),
    });
    start = next;
  }
  return parts;
}
