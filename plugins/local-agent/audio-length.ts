/**
 * How long a voice note or audio file is, read from its container before it
 * is sent to be transcribed (transcription is billed by the length of the
 * audio, not by its bytes: ten hours of low-bitrate Opus fit in 10 MiB).
 * mediabunny reads the container (Ogg, WebM, MP4 / M4A, MP3, WAV, FLAC,
 * ADTS); nothing is decoded. It is loaded on the first audio file.
 */

/** The length of `bytes` in seconds; undefined when no audio track of a known container is found in them. */
export async function audioSeconds(bytes: Uint8Array): Promise<number | undefined> {
  const mb = await import('mediabunny');
  try {
    const input = new mb.Input({ formats: mb.ALL_FORMATS, source: new mb.BufferSource(bytes) });
    if (!(await input.getPrimaryAudioTrack())) return undefined;
    const seconds = await input.computeDuration();
    return Number.isFinite(seconds) && seconds > 0 ? seconds : undefined;
  } catch {
    // Not audio in a container mediabunny reads: its length is unknown.
    return undefined;
  }
}
