/**
 * How long a voice note or audio file plays, measured before it is sent to
 * be transcribed (transcription is billed by the length of the audio, not by
 * its bytes: ten hours of low-bitrate Opus fit in 10 MiB). The length is what
 * a decoder would play, not what the container declares (its maker writes
 * that: an Ogg file's last page may claim 2 s over an hour of packets):
 * - Ogg Opus: every packet of every Opus stream, walked here over the pages
 *   with a good checksum, each counted by its TOC byte (`opusPacketSeconds`);
 *   and, as for the others below, by mediabunny: the longer count wins;
 * - WAV: the file's bytes at sample rate × channels × bytes a sample (PCM or
 *   float only), never the byte rate its `fmt ` chunk claims;
 * - others (WebM / Matroska, MP4 / M4A, MP3, FLAC, ADTS, Ogg Vorbis): every
 *   packet mediabunny reads from each audio track (the longest track counts),
 *   without decoding, each counted by its own header where the codec has one
 *   (Opus, MPEG audio, FLAC; AAC: 1024 samples), else by its declared
 *   duration; never less than the container's declared duration.
 * The walk is linear in the file's bytes (at most `maxBytes`) and stops once
 * the length passes `limit`. mediabunny is loaded on the first such file.
 */
import type { EncodedPacket, InputAudioTrack } from 'mediabunny';
import { flacFrameSamples, mpegFrameSeconds, opusPacketSeconds } from './audio-frames.js';

/**
 * The length of `bytes` in seconds (once past `limit`, some length over it); undefined when no audio track of a known
 * container is found in them, or its length cannot be known.
 */
export async function audioSeconds(bytes: Uint8Array, limit = Number.POSITIVE_INFINITY): Promise<number | undefined> {
  const ogg = startsWith(bytes, 0, 'OggS');
  const own = ogg ? oggOpusSeconds(bytes, limit) : wavSeconds(bytes);
  if (own === null) return undefined;
  // An Ogg file is also read by mediabunny: the longer count wins, so a page one reader skips cannot hide packets.
  if (own !== undefined && (!ogg || own > limit)) return own > 0 ? own : undefined;
  let packets: number | undefined;
  try {
    packets = await packetSeconds(bytes, limit);
  } catch {
    // Not audio in a container mediabunny reads: its length is unknown (unless the Ogg walk found Opus).
  }
  const seconds = Math.max(own ?? 0, packets !== undefined && Number.isFinite(packets) ? packets : 0);
  return seconds > 0 ? seconds : undefined;
}

/** An Ogg stream being read: whether it is Opus, whether its next packet is its BOS page's first, the first bytes of the packet open. */
interface OggStream {
  opus: boolean;
  bos: boolean;
  head: number[];
  open: boolean;
}

/**
 * Seconds of the Opus packets of an Ogg file; undefined when it holds no Opus stream; null when it cannot be read in
 * time linear in its bytes (candidate pages that fail their checksum cost more than the file's bytes over again).
 * A page is taken only with version 0 and a good CRC (as a demuxer does); after a good page the walk goes on past
 * it, after a bad one from the next `OggS`.
 */
function oggOpusSeconds(b: Uint8Array, limit: number): number | undefined | null {
  const walk = new OggOpusWalk(b);
  let budget = b.length + 65_536;
  for (let pos = indexOf(b, 'OggS', 0); pos >= 0 && pos + 27 <= b.length && walk.seconds <= limit; ) {
    const size = oggPageSize(b, pos);
    if (size === undefined) {
      pos = indexOf(b, 'OggS', pos + 4);
      continue;
    }
    const good = oggCrc(b, pos, size) === new DataView(b.buffer, b.byteOffset + pos).getUint32(22, true);
    if (good) walk.page(pos);
    else if ((budget -= size) < 0) return null;
    pos = indexOf(b, 'OggS', good ? pos + size : pos + 4);
  }
  return walk.end();
}

/** The bytes of the Ogg page at `pos` (header, lacing, payload); undefined when its version is not 0 or it overruns the file. */
function oggPageSize(b: Uint8Array, pos: number): number | undefined {
  if (b[pos + 4] !== 0 || b[pos + 5]! > 7) return undefined;
  const segments = b[pos + 26]!;
  if (pos + 27 + segments > b.length) return undefined;
  let size = 27 + segments;
  for (let i = 0; i < segments; i++) size += b[pos + 27 + i]!;
  return pos + size <= b.length ? size : undefined;
}

/** The Ogg page checksum table (CRC-32, polynomial 0x04c11db7, no reflection). */
const OGG_CRC = Uint32Array.from({ length: 256 }, (_, i) => {
  let r = i << 24;
  for (let j = 0; j < 8; j++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
  return r >>> 0;
});

/** The CRC of the `size` bytes of the page at `pos`, its own CRC field (bytes 22-25) taken as zeros. */
function oggCrc(b: Uint8Array, pos: number, size: number): number {
  let crc = 0;
  for (let i = 0; i < size; i++) {
    const byte = i >= 22 && i < 26 ? 0 : b[pos + i]!;
    crc = ((crc << 8) ^ OGG_CRC[((crc >>> 24) ^ byte) & 255]!) >>> 0;
  }
  return crc;
}

/**
 * The packets of an Ogg file's streams, read page by page: the seconds its Opus streams' packets play so far. A
 * stream is known from its BOS page, and is Opus when that page's first packet is `OpusHead`; pages of a stream with
 * no BOS page before them are not read.
 */
class OggOpusWalk {
  seconds = 0;
  private anyOpus = false;
  private readonly streams = new Map<number, OggStream>();

  constructor(private readonly b: Uint8Array) {}

  /** Reads the good page at `pos`: a packet ends at each segment shorter than 255 bytes. */
  page(pos: number): void {
    const b = this.b;
    const serial = new DataView(b.buffer, b.byteOffset + pos).getUint32(14, true);
    const flags = b[pos + 5]!;
    const bos = (flags & 2) === 2;
    const s = bos ? { opus: this.streams.get(serial)?.opus ?? false, bos: true, head: [], open: false } : this.streams.get(serial);
    if (!s) return;
    this.streams.set(serial, s);
    const continued = !bos && (flags & 1) === 1;
    // A continued page's first segments end a packet begun on an earlier page (skipped when none is open here);
    // a page not flagged as continuing ends the packet left open.
    let skipping = continued && !s.open;
    if (!continued && s.open) this.finish(s);
    const segments = b[pos + 26]!;
    let data = pos + 27 + segments;
    for (let i = 0; i < segments; i++) {
      const lace = b[pos + 27 + i]!;
      if (skipping) skipping = lace === 255;
      else {
        s.open = true;
        for (let k = data; k < data + lace && s.head.length < 8; k++) s.head.push(b[k]!);
        if (lace < 255) this.finish(s);
      }
      data += lace;
    }
  }

  /** The seconds of the Opus packets read (the packets left open counted); undefined when no stream is Opus. */
  end(): number | undefined {
    for (const s of this.streams.values()) if (s.open) this.finish(s);
    return this.anyOpus ? this.seconds : undefined;
  }

  /**
   * Ends the packet `s` has open: a BOS page's first packet says whether the stream is Opus (`OpusHead`; once Opus, a
   * stream stays so); an Opus stream's other packets are sound, but for its header and tags.
   */
  private finish(s: OggStream): void {
    const magic = String.fromCharCode(...s.head.slice(0, 8));
    if (s.bos) s.opus ||= magic === 'OpusHead';
    else if (s.opus && magic !== 'OpusHead' && magic !== 'OpusTags') this.seconds += opusPacketSeconds(s.head[0], s.head[1]);
    this.anyOpus ||= s.opus;
    s.bos = false;
    s.head = [];
    s.open = false;
  }
}

/** The last 14 bytes of the GUID of a WAVE_FORMAT_EXTENSIBLE subformat (its first two are the format tag). */
const WAV_GUID_TAIL = [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71];

/**
 * Seconds of a WAV file: all its bytes at the rate its PCM or float samples take (sample rate × channels × bytes a
 * sample), never its `fmt ` chunk's byte rate (a field a decoder does not need); undefined when it is not a WAV file;
 * null when its length is unknown: not PCM or float (format tag 1, 3, or extensible with one of those), or no `fmt `.
 */
function wavSeconds(b: Uint8Array): number | undefined | null {
  if (!startsWith(b, 0, 'RIFF') || !startsWith(b, 8, 'WAVE')) return undefined;
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  for (let at = 12; at + 8 <= b.length; ) {
    const size = view.getUint32(at + 4, true);
    if (startsWith(b, at, 'fmt ')) {
      if (at + 24 > b.length) return null;
      let tag = view.getUint16(at + 8, true);
      if (tag === 0xfffe && at + 48 <= b.length && WAV_GUID_TAIL.every((x, i) => b[at + 34 + i] === x)) tag = view.getUint16(at + 32, true);
      const channels = view.getUint16(at + 10, true);
      const rate = view.getUint32(at + 12, true);
      const bits = view.getUint16(at + 22, true);
      if ((tag !== 1 && tag !== 3) || channels === 0 || rate === 0 || bits === 0 || bits > 64) return null;
      return b.length / (rate * channels * Math.ceil(bits / 8));
    }
    at += 8 + size + (size & 1);
  }
  return null;
}

/**
 * Seconds of the packets of the longest audio track, as mediabunny reads them (a file may carry several, and a
 * provider may play any); undefined when there is none.
 */
async function packetSeconds(bytes: Uint8Array, limit: number): Promise<number | undefined> {
  const mb = await import('mediabunny');
  const input = new mb.Input({ formats: mb.ALL_FORMATS, source: new mb.BufferSource(bytes) });
  const tracks = await input.getAudioTracks();
  if (tracks.length === 0) return undefined;
  let longest = 0;
  for (const track of tracks) {
    const sink = new mb.EncodedPacketSink(track);
    let seconds = 0;
    for (let p = await sink.getFirstPacket(); p && seconds <= limit; p = await sink.getNextPacket(p)) seconds += packetLength(track, p);
    longest = Math.max(longest, seconds);
    if (longest > limit) return longest;
  }
  const declared = await input.computeDuration();
  return Math.max(longest, Number.isFinite(declared) ? declared : 0);
}

/** Seconds one packet plays: by its own header where its codec has one, never less than its declared duration. */
function packetLength(track: InputAudioTrack, p: EncodedPacket): number {
  const declared = Number.isFinite(p.duration) && p.duration > 0 ? p.duration : 0;
  const rate = track.sampleRate > 0 ? track.sampleRate : undefined;
  let own: number | undefined;
  if (track.codec === 'opus') own = opusPacketSeconds(p.data[0], p.data[1]);
  else if (track.codec === 'mp3') own = mpegFrameSeconds(p.data);
  else if (track.codec === 'aac' && rate) own = 1024 / rate;
  else if (track.codec === 'flac' && rate) own = (flacFrameSamples(p.data) ?? 0) / rate;
  return Math.max(own ?? 0, declared);
}

function startsWith(b: Uint8Array, at: number, text: string): boolean {
  for (let i = 0; i < text.length; i++) if (b[at + i] !== text.charCodeAt(i)) return false;
  return true;
}

function indexOf(b: Uint8Array, text: string, from: number): number {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).indexOf(text, from, 'latin1');
}
