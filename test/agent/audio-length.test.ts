import * as mb from 'mediabunny';
import { describe, expect, it } from 'vitest';
import { flacFrameSamples, mpegFrameSeconds, opusPacketSeconds } from '../../plugins/local-agent/audio-frames.js';
import { audioSeconds } from '../../plugins/local-agent/audio-length.js';
import { oggOpus } from '../helpers/media.js';

/** The Ogg page checksum table (CRC-32, polynomial 0x04c11db7, no reflection). */
const OGG_CRC = Array.from({ length: 256 }, (_, i) => {
  let r = i << 24;
  for (let j = 0; j < 8; j++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
  return r >>> 0;
});

/** An Ogg page of stream `serial` holding `packets`, its checksum good or (`good` false) off by one bit. */
function oggPage(serial: number, seq: number, flags: number, packets: readonly Buffer[], good = true): Buffer {
  const lacing = packets.flatMap((p) => [...Array<number>(Math.floor(p.length / 255)).fill(255), p.length % 255]);
  const header = Buffer.alloc(27);
  header.write('OggS', 0, 'latin1');
  header[5] = flags;
  header.writeUInt32LE(serial, 14);
  header.writeUInt32LE(seq, 18);
  header[26] = lacing.length;
  const bytes = Buffer.concat([header, Buffer.from(lacing), ...packets]);
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) ^ OGG_CRC[((crc >>> 24) ^ b) & 255]!) >>> 0;
  bytes.writeUInt32LE(good ? crc : (crc ^ 1) >>> 0, 22);
  return bytes;
}

/**
 * An Ogg file whose one Opus stream plays an hour of 20 ms packets, led by two pages with bad checksums (which a
 * demuxer skips): a junk first packet of the real stream's serial, and a whole tiny Opus stream of its own.
 */
function poisonedOgg(): Buffer {
  const head = Buffer.alloc(19);
  head.write('OpusHead', 0, 'latin1');
  head[8] = 1;
  head[9] = 1;
  head.writeUInt32LE(48_000, 12);
  const tags = Buffer.concat([Buffer.from('OpusTags', 'latin1'), Buffer.alloc(8)]);
  const packet = Buffer.from([1 << 3, 0, 0]); // SILK 20 ms, one frame
  const pages = [oggPage(1, 0, 2, [Buffer.from('junk')], false), oggPage(2, 0, 6, [head, tags, packet], false)];
  pages.push(oggPage(1, 0, 2, [head]), oggPage(1, 1, 0, [tags]));
  for (let i = 0; i < 1800; i++) pages.push(oggPage(1, i + 2, i === 1799 ? 4 : 0, Array<Buffer>(100).fill(packet)));
  return Buffer.concat(pages);
}

/**
 * An Opus stream's first page, then 10 MiB of `OggS` every 9 bytes, each a version 0 page header of that stream
 * (serial 0xffffff00) whose lacing claims about 28 KiB: the pages overlap, and none has a good checksum.
 */
function overlappingOggS(): Buffer {
  const head = Buffer.alloc(19);
  head.write('OpusHead', 0, 'latin1');
  head[8] = 1;
  head[9] = 1;
  const first = oggPage(0xffff_ff00, 0, 2, [head]);
  const bytes = Buffer.alloc(10 * 1024 * 1024, 0xff);
  first.copy(bytes);
  for (let i = 63; i + 9 <= bytes.length; i += 9) {
    bytes.write('OggS', i, 'latin1');
    bytes[i + 4] = 0;
    bytes[i + 5] = 0;
  }
  return bytes;
}

/**
 * A WebM file of two Opus tracks: the first plays 1 s, the second 6000 packets of 120 ms (720 s) all stamped within
 * its first second.
 */
async function twoTrackWebm(): Promise<Uint8Array> {
  const target = new mb.BufferTarget();
  const output = new mb.Output({ format: new mb.WebMOutputFormat(), target });
  const short = new mb.EncodedAudioPacketSource('opus');
  const long = new mb.EncodedAudioPacketSource('opus');
  output.addAudioTrack(short);
  output.addAudioTrack(long);
  await output.start();
  const meta = { decoderConfig: { codec: 'opus', numberOfChannels: 1, sampleRate: 48_000 } };
  for (let i = 0; i < 50; i++) await short.add(new mb.EncodedPacket(Uint8Array.from([31 << 3]), 'key', i * 0.02, 0.02), i === 0 ? meta : undefined);
  for (let i = 0; i < 6000; i++) await long.add(new mb.EncodedPacket(Uint8Array.from([(31 << 3) | 3, 6]), 'key', i / 10_000, 0), i === 0 ? meta : undefined);
  await output.finalize();
  return new Uint8Array(target.buffer!);
}

/**
 * A WAV file of `bytes` bytes of 16 kHz mono 16-bit samples whose `data` chunk declares `declared` bytes, its `fmt `
 * chunk's byte rate `byteRate` and format tag `tag`.
 */
function wav(bytes: number, declared: number, { byteRate = 32_000, tag = 1 } = {}): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + declared, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(tag, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(16_000, 24);
  header.writeUInt32LE(byteRate, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(declared, 40);
  return Buffer.concat([header, Buffer.alloc(bytes - 44)]);
}

describe('audioSeconds', () => {
  it('counts an Ogg Opus file by its packets, whatever its last page claims', async () => {
    expect(await audioSeconds(oggOpus(60_000))).toBeCloseTo(60, 6);
    expect(await audioSeconds(oggOpus(700_000, 'x', { claimMs: 2000 }))).toBeCloseTo(700, 6);
    // Stopped once past the limit: some length over it.
    expect(await audioSeconds(oggOpus(7_200_000), 600)).toBeGreaterThan(600);
  });

  it('counts a WAV file by all its bytes at its byte rate, whatever its data chunk declares', async () => {
    expect(await audioSeconds(wav(32_000 * 30, 32_000))).toBeCloseTo(30, 3);
  });

  it('counts a WAV file at its sample rate, channels and sample size, whatever byte rate it claims, and refuses a format that is not PCM', async () => {
    expect(await audioSeconds(wav(32_000 * 30, 32_000, { byteRate: 0xffff_ffff }))).toBeCloseTo(30, 3);
    expect(await audioSeconds(wav(32_000 * 30, 32_000, { byteRate: 0 }))).toBeCloseTo(30, 3);
    expect(await audioSeconds(wav(32_000 * 30, 32_000, { tag: 2 }))).toBeUndefined(); // ADPCM: its length is unknown
    expect(await audioSeconds(wav(32_000 * 30, 32_000, { tag: 7, byteRate: 0xffff_ffff }))).toBeUndefined(); // μ-law, not read elsewhere
  });

  it('counts an Ogg file’s Opus packets past pages with bad checksums that claim its stream or add a tiny one', async () => {
    expect(await audioSeconds(poisonedOgg(), 600)).toBeGreaterThan(600);
    expect(await audioSeconds(poisonedOgg())).toBeCloseTo(3600, 3);
  });

  it('reads a file of overlapping Ogg page headers with bad checksums in time linear in its bytes, its length unknown', async () => {
    expect(await audioSeconds(overlappingOggS(), 600)).toBeUndefined();
  });

  it('counts the longest audio track of a file with several', async () => {
    expect(await audioSeconds(await twoTrackWebm())).toBeCloseTo(720, 3);
  });
});

describe('packet lengths', () => {
  it('reads an Opus packet’s TOC byte and frame count (RFC 6716 §3.1)', () => {
    expect(opusPacketSeconds(1 << 3, undefined)).toBeCloseTo(0.02); // SILK 20 ms, one frame
    expect(opusPacketSeconds((3 << 3) | 1, undefined)).toBeCloseTo(0.12); // SILK 60 ms, two frames
    expect(opusPacketSeconds((16 << 3) | 3, 48)).toBeCloseTo(0.12); // CELT 2.5 ms, 48 frames
    expect(opusPacketSeconds((31 << 3) | 3, 0x80 | 6)).toBeCloseTo(0.12); // the count byte's VBR bit is not a count
    expect(opusPacketSeconds((31 << 3) | 3, undefined)).toBe(0);
    expect(opusPacketSeconds(undefined, undefined)).toBe(0);
  });

  it('reads an MPEG audio frame header and a FLAC frame header', () => {
    expect(mpegFrameSeconds(Uint8Array.from([0xff, 0xfb, 0x90, 0x00]))).toBeCloseTo(1152 / 44_100); // MPEG-1 layer III
    expect(mpegFrameSeconds(Uint8Array.from([0xff, 0xf3, 0x90, 0x00]))).toBeCloseTo(576 / 22_050); // MPEG-2 layer III
    expect(mpegFrameSeconds(Uint8Array.from([0x00, 0x00, 0x00, 0x00]))).toBeUndefined();
    expect(flacFrameSamples(Uint8Array.from([0xff, 0xf8, 0xc9, 0x08, 0x00]))).toBe(4096);
    expect(flacFrameSamples(Uint8Array.from([0xff, 0xf8, 0x79, 0x08, 0x00, 0x11, 0xff]))).toBe(0x1200);
  });
});
