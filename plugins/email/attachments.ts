/**
 * Incoming attachments by reference, as other channels keep files on their
 * platform: the mail stays in the mailbox, its attachment parts are named
 * `imap:<UIDVALIDITY>:<UID>:<part>`, and a runner that builds a prompt
 * downloads the part's bytes over IMAP (`fetchEmailAttachment`). A part
 * larger than `maxAttachmentBytes` is not passed on; the text names it.
 */
import type { MessageStructureObject } from 'imapflow';
import { type Attachment, type FetchedFile, InvalidInputError } from 'steerbot/plugin';
import { imapError } from './errors.js';
import { type ImapSettings, openMailbox } from './mailbox.js';

const REF_RE = /^imap:(\d{1,20}):(\d{1,10}):(\d+(?:\.\d+)*)$/;

function kindOf(mime: string): Attachment['kind'] {
  if (mime.startsWith('image/')) return 'image';
  if (mime.startsWith('audio/')) return 'audio';
  if (mime.startsWith('video/')) return 'video';
  return 'file';
}

/** A part's file name: the disposition's `filename`, else the type's `name`. */
const nameOf = (node: MessageStructureObject): string | undefined => node.dispositionParameters?.filename ?? node.parameters?.name;

/** Decoded size of a part, in bytes, estimated from its encoded size (base64 carries 3 bytes in 4 characters; its line breaks count too, so never below). */
const decodedSize = (node: MessageStructureObject): number =>
  node.encoding?.toLowerCase() === 'base64' ? Math.floor(((node.size ?? 0) * 3) / 4) : (node.size ?? 0);

/** The attachment parts of a mail's body structure: passed on, or too large (their names). */
export function attachmentsOf(
  structure: MessageStructureObject | undefined,
  o: { validity: string; uid: number; maxBytes: number },
): { attachments: Attachment[]; tooLarge: string[] } {
  const attachments: Attachment[] = [];
  const tooLarge: string[] = [];
  const visit = (node: MessageStructureObject) => {
    if (node.childNodes?.length) {
      for (const child of node.childNodes) visit(child);
      return;
    }
    const name = nameOf(node);
    const isText = node.type.startsWith('text/') && node.disposition !== 'attachment';
    if (node.part === undefined || isText || (node.disposition !== 'attachment' && name === undefined)) return;
    const size = decodedSize(node);
    const shown = (name ?? 'attachment').slice(0, 512);
    if (size > o.maxBytes || attachments.length >= 32) {
      tooLarge.push(shown);
      return;
    }
    attachments.push({ kind: kindOf(node.type), ref: `imap:${o.validity}:${o.uid}:${node.part}`, name: shown, mime: node.type.slice(0, 128), size });
  };
  if (structure) visit(structure);
  return { attachments, tooLarge };
}

/**
 * Downloads one attachment part over a connection of its own.
 * @throws InvalidInputError for a ref that is not this channel's, a mail no longer there (a new UIDVALIDITY) or a part larger than `maxBytes`; EmailApiError when IMAP fails.
 */
export async function fetchEmailAttachment(s: ImapSettings, attachment: Attachment, maxBytes: number): Promise<FetchedFile> {
  const m = attachment.ref.match(REF_RE);
  if (!m) throw new InvalidInputError('not an email attachment reference');
  const [, validity, uid, part] = m as unknown as [string, string, string, string];
  if (attachment.size !== undefined && attachment.size > maxBytes) throw new InvalidInputError(`attachment is ${attachment.size} bytes, more than ${maxBytes}`);
  const client = await openMailbox(s, { readOnly: true });
  try {
    if (client.mailbox && String(client.mailbox.uidValidity) !== validity)
      throw new InvalidInputError('the mail of this attachment is no longer in the mailbox');
    let download: Awaited<ReturnType<typeof client.download>>;
    try {
      download = await client.download(uid, part, { uid: true, maxBytes: maxBytes + 1 });
    } catch (err) {
      throw imapError('download', err, [s.password]);
    }
    if (!download.content) throw new InvalidInputError('the mail of this attachment is no longer in the mailbox');
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of download.content as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) throw new InvalidInputError(`attachment is more than ${maxBytes} bytes`);
      chunks.push(chunk);
    }
    return { data: new Uint8Array(Buffer.concat(chunks)), ...(download.meta.contentType && { mediaType: download.meta.contentType }) };
  } finally {
    await client.logout().catch(() => client.close());
  }
}
