/**
 * LINE's audio message plays M4A: a spoken reply is made as AAC (ADTS
 * frames, what the speech model returns for `aac`) and put in an MP4
 * container here, its AAC frames kept as they are (mediabunny remuxes; no
 * decoding, no new encoding); an M4A file is timed from its container. Other
 * audio (Opus, MP3) LINE does not promise to play: it goes as a link.
 * mediabunny is loaded on the first audio file.
 */
import type { OutboundFile } from 'steerbot/channel';

/** An audio file as LINE takes it: M4A, with its length. */
export interface LineAudio {
  file: OutboundFile;
  durationMs: number;
}

const M4A_TYPES = new Set(['audio/mp4', 'audio/x-m4a', 'audio/m4a']);
const AAC_TYPES = new Set(['audio/aac', 'audio/aacp']);

/** `file` as an M4A LINE plays, with its length; undefined when it is no AAC or M4A audio, or does not parse as such. */
export async function lineAudio(file: OutboundFile): Promise<LineAudio | undefined> {
  const aac = AAC_TYPES.has(file.mimeType);
  if (!aac && !M4A_TYPES.has(file.mimeType)) return undefined;
  const mb = await import('mediabunny');
  try {
    const input = new mb.Input({ formats: mb.ALL_FORMATS, source: new mb.BufferSource(file.bytes) });
    const track = await input.getPrimaryAudioTrack();
    if (!track || (await track.getCodecParameterString())?.startsWith('mp4a') !== true) return undefined;
    const durationMs = Math.round((await input.computeDuration()) * 1000);
    if (!aac) return durationMs > 0 ? { file, durationMs } : undefined;
    const target = new mb.BufferTarget();
    const output = new mb.Output({ format: new mb.Mp4OutputFormat({ fastStart: 'in-memory' }), target });
    const conversion = await mb.Conversion.init({ input, output });
    if (!conversion.isValid) return undefined;
    await conversion.execute();
    if (!target.buffer || durationMs <= 0) return undefined;
    const name = `${file.name.replace(/\.[^.]*$/, '')}.m4a`;
    return { file: { ...file, name, mimeType: 'audio/mp4', bytes: new Uint8Array(target.buffer) }, durationMs };
  } catch {
    // Not the audio it says it is: LINE gets it as a link.
    return undefined;
  }
}
