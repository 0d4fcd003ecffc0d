/**
 * The file types `send_file` sends: known by their extension (or, for a
 * URL without one, by the answer's content type), and checked against the
 * bytes, so a renamed executable or a page posing as a PDF is refused.
 * Markup a client could run (HTML, SVG) and executables are never sent.
 * The same signatures tell what an incoming attachment really is
 * (`contentTypeOf`) before it goes to the model.
 */

/** A type `send_file` sends: its media type and how its content is recognised. */
interface FileType {
  mimeType: string;
  /** Whether `bytes` look like this type. */
  looksLike(bytes: Uint8Array): boolean;
}

const startsWith = (bytes: Uint8Array, ...sig: number[]) => sig.every((b, i) => bytes[i] === b);
const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));
/** Text: no NUL byte in its first 8 KiB. */
const text = (bytes: Uint8Array) => !bytes.subarray(0, 8192).includes(0);
const zip = (bytes: Uint8Array) => startsWith(bytes, 0x50, 0x4b, 0x03, 0x04);

const PNG: FileType = { mimeType: 'image/png', looksLike: (b) => startsWith(b, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a) };
const JPEG: FileType = { mimeType: 'image/jpeg', looksLike: (b) => startsWith(b, 0xff, 0xd8, 0xff) };
const GIF: FileType = { mimeType: 'image/gif', looksLike: (b) => startsWith(b, ...ascii('GIF8')) };
const WEBP: FileType = { mimeType: 'image/webp', looksLike: (b) => startsWith(b, ...ascii('RIFF')) && startsWith(b.subarray(8), ...ascii('WEBP')) };
const PDF: FileType = { mimeType: 'application/pdf', looksLike: (b) => startsWith(b, ...ascii('%PDF-')) };
const OOXML = 'application/vnd.openxmlformats-officedocument';

/** By lower-case extension. */
const BY_EXTENSION: Record<string, FileType> = {
  png: PNG,
  jpg: JPEG,
  jpeg: JPEG,
  gif: GIF,
  webp: WEBP,
  pdf: PDF,
  txt: { mimeType: 'text/plain', looksLike: text },
  md: { mimeType: 'text/markdown', looksLike: text },
  csv: { mimeType: 'text/csv', looksLike: text },
  json: { mimeType: 'application/json', looksLike: text },
  zip: { mimeType: 'application/zip', looksLike: zip },
  docx: { mimeType: `${OOXML}.wordprocessingml.document`, looksLike: zip },
  xlsx: { mimeType: `${OOXML}.spreadsheetml.sheet`, looksLike: zip },
  pptx: { mimeType: `${OOXML}.presentationml.presentation`, looksLike: zip },
};

/** Content that is never sent, whatever its name says: Windows and ELF executables, scripts with a `#!` line. */
function executable(bytes: Uint8Array): boolean {
  return startsWith(bytes, 0x4d, 0x5a) || startsWith(bytes, 0x7f, ...ascii('ELF')) || startsWith(bytes, ...ascii('#!'));
}

/** The types an attachment goes to the model as only when its bytes show them: the images every provider reads, and PDF. */
const SHOWN_BY_CONTENT = [PNG, JPEG, GIF, WEBP, PDF];

/** The media type `bytes` show when they are a PNG, JPEG, GIF, WebP or PDF file, else undefined. Pure. */
export function contentTypeOf(bytes: Uint8Array): string | undefined {
  return SHOWN_BY_CONTENT.find((t) => t.looksLike(bytes))?.mimeType;
}

/** The extensions `send_file` sends, for its description and refusals. */
export const SENDABLE_EXTENSIONS = Object.keys(BY_EXTENSION);

/** The lower-case extension of a file name, or ''. Pure. */
export function extensionOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
}

/** The extension of the first sendable type with this media type (`image/png` → `png`), or undefined. Pure. */
export function extensionFor(contentType: string | undefined): string | undefined {
  const mime = contentType?.split(';')[0]?.trim().toLowerCase();
  return mime ? Object.keys(BY_EXTENSION).find((ext) => BY_EXTENSION[ext]!.mimeType === mime) : undefined;
}

/** The media type of a file named `name` with content `bytes`, or why it is refused. Pure. */
export function sendableType(name: string, bytes: Uint8Array): { mimeType: string } | { error: string } {
  const ext = extensionOf(name);
  const type = BY_EXTENSION[ext];
  if (!type) return { error: `refused: ${name} is not a type that can be sent (allowed: ${SENDABLE_EXTENSIONS.join(', ')})` };
  if (executable(bytes) || !type.looksLike(bytes)) return { error: `refused: the content of ${name} is not ${ext.toUpperCase()}` };
  return { mimeType: type.mimeType };
}
