/**
 * How long a voice note or audio file plays, measured before it is sent to
 * be transcribed (transcription is billed by the length of the audio, not by
 * its bytes: ten hours of low-bitrate Opus fit in 10 MiB). The length is what
 * a decoder would play, never what the container declares (its maker writes
 * that: an Ogg file's last page may claim 2 s over an hour of packets):
 * - Ogg Opus: every packet of every Opus stream, walked here, each counted by
 *   its TOC byte (`opusPacketSeconds`);
 * - WAV: the file's bytes at the byte rate of its `fmt ` chunk;
 * - others (WebM / Matroska, MP4 / M4A, MP3, FLAC, ADTS, Ogg Vorbis): every
 *   packet mediabunny reads from the track, without decoding, each counted by
 *   its own header where the codec has one (Opus, MPEG audio, FLAC; AAC: 1024
 *   samples), else by its declared duration; never less than the container's
 *   declared duration.
 * The walk is linear in the file's bytes (at most `maxBytes`) and stops once
 * the length passes `limit`. mediabunny is loaded on the first such file.
 */
import type { EncodedPacket, InputAudioTrack } from 'mediabunny';
import { flacFrameSamples, mpegFrameSeconds, opusPacketSeconds } from './audio-frames.js';

/**
 * The length of `bytes` in seconds (once past `limit`, some length over it); undefined when no audio track of a known
 * container is found in them.
 */
export async function audioSeconds(bytes: Uint8Array, limit = Number.POSITIVE_INFINITY): Promise<number | undefined> {
  const seconds = startsWith(bytes, 0, 'OggS') ? oggOpusSeconds(bytes, limit) : wavSeconds(bytes);
  if (seconds !== undefined) return seconds > 0 ? seconds : undefined;
  try {
    const packets = await packetSeconds(bytes, limit);
    return packets !== undefined && Number.isFinite(packets) && packets > 0 ? packets : undefined;
  } catch {
    // Not audio in a container mediabunny reads: its length is unknown.
    return undefined;
  }
}

/** An Ogg stream being read: whether it is Opus, its packets so far, the first bytes of the one open (the TOC and count byte). */
interface OggStream {
  opus: boolean;
  packets: number;
  head: number[];
  open: boolean;
}

/**
 * Seconds of the Opus packets of an Ogg file; undefined when it holds no Opus stream. Every `OggS` in the file is
 * taken for a page (none is skipped as another page's payload, so no page a demuxer would find after a bad checksum
 * is missed; a false one only adds).
 */
function oggOpusSeconds(b: Uint8Array, limit: number): number | undefined {
  const walk = new OggOpusWalk(b);
  for (let pos = indexOf(b, 'OggS', 0); pos >= 0 && pos + 27 <= b.length && walk.seconds <= limit; pos = indexOf(b, 'OggS', pos + 4)) walk.page(pos);
  return walk.end();
}

/** The packets of an Ogg file's streams, read page by page: the seconds its Opus streams' packets play so far. */
class OggOpusWalk {
  seconds = 0;
  private anyOpus = false;
  private readonly streams = new Map<number, OggStream>();

  constructor(private readonly b: Uint8Array) {}

  /** Reads the page at `pos` (its header is in the bytes): a packet ends at each segment shorter than 255 bytes. */
  page(pos: number): void {
    const b = this.b;
    const serial = new DataView(b.buffer, b.byteOffset + pos).getUint32(14, true);
    const s = this.streams.get(serial) ?? { opus: false, packets: 0, head: [], open: false };
    this.streams.set(serial, s);
    const continued = (b[pos + 5]! & 1) === 1;
    // A continued page's first segments end a packet begun on an earlier page (skipped when none is open here);
    // a page not flagged as continuing ends the packet left open.
    let skipping = continued && !s.open;
    if (!continued && s.open) this.finish(s);
    const segments = b[pos + 26]!;
    let data = pos + 27 + segments;
    for (let i = 0; i < segments && pos + 27 + i < b.length; i++) {
      const lace = b[pos + 27 + i]!;
      if (skipping) skipping = lace === 255;
      else {
        s.open = true;
        for (let k = data; k < data + lace && k < b.length && s.head.length < 8; k++) s.head.push(b[k]!);
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

  /** Ends the packet `s` has open: its first is the stream's header (`OpusHead`?), its second the tags, the rest sound. */
  private finish(s: OggStream): void {
    if (s.packets === 0) s.opus = s.head.length >= 8 && String.fromCharCode(...s.head.slice(0, 8)) === 'OpusHead';
    else if (s.opus && s.packets >= 2) this.seconds += opusPacketSeconds(s.head[0], s.head[1]);
    this.anyOpus ||= s.opus;
    s.packets++;
    s.head = [];
    s.open = false;
  }
}

/** Seconds of a WAV file: all its bytes at its `fmt ` chunk's byte rate; undefined when it is not a WAV file. */
function wavSeconds(b: Uint8Array): number | undefined {
  if (!startsWith(b, 0, 'RIFF') || !startsWith(b, 8, 'WAVE')) return undefined;
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  for (let at = 12; at + 16 <= b.length; ) {
    const size = view.getUint32(at + 4, true);
    if (startsWith(b, at, 'fmt ') && at + 20 <= b.length) {
      const byteRate = view.getUint32(at + 16, true);
      return byteRate > 0 ? b.length / byteRate : undefined;
    }
    at += 8 + size + (size & 1);
  }
  return undefined;
}

/** Seconds of the packets of the primary audio track, as mediabunny reads them; undefined when there is none. */
async function packetSeconds(bytes: Uint8Array, limit: number): Promise<number | undefined> {
  const mb = await import('mediabunny');
  const input = new mb.Input({ formats: mb.ALL_FORMATS, source: new mb.BufferSource(bytes) });
  const track = await input.getPrimaryAudioTrack();
  if (!track) return undefined;
  const sink = new mb.EncodedPacketSink(track);
  let seconds = 0;
  for (let p = await sink.getFirstPacket(); p && seconds <= limit; p = await sink.getNextPacket(p)) seconds += packetLength(track, p);
  const declared = await input.computeDuration();
  return Math.max(seconds, Number.isFinite(declared) ? declared : 0);
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
