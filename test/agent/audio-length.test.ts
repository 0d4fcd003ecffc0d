import { describe, expect, it } from 'vitest';
import { flacFrameSamples, mpegFrameSeconds, opusPacketSeconds } from '../../plugins/local-agent/audio-frames.js';
import { audioSeconds } from '../../plugins/local-agent/audio-length.js';
import { oggOpus } from '../helpers/media.js';

/** A WAV file of `bytes` bytes of 16 kHz mono 16-bit PCM whose `data` chunk declares `declared` bytes. */
function wav(bytes: number, declared: number): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + declared, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(16_000, 24);
  header.writeUInt32LE(32_000, 28);
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
