/**
 * Spoken replies (`voice`): after a run's answer went out as text, the AI
 * SDK's speech generation reads it aloud and the audio goes out as a voice
 * message (Telegram `sendVoice`, elsewhere an audio file) through the run's
 * delivery, in the format its channel wants (OGG/Opus, or AAC for LINE), under a key of its answer's own. When: the run's profile's
 * `voice`, else the agent's `voice.replies`: `off`, `always`, or
 * `when-spoken-to` (a message the run answers was a voice note). The text
 * stays the record's answer; a failed speech call is logged and the text
 * stands alone.
 */
import { generateSpeech, type SpeechModel } from 'ai';
import type { VoiceFormat } from 'steerbot/channel';
import type { MessageReceived } from 'steerbot/plugin';
import type { RunContext } from 'steerbot/runner';

/** When replies are spoken. */
export type VoiceReplies = 'off' | 'always' | 'when-spoken-to';

/** Options of spoken replies. */
export interface VoiceReplyOptions {
  /** The speech model (`createSpeechModel`). */
  model: SpeechModel;
  /** The provider's voice name, e.g. `alloy`. Default: the provider's. */
  voice?: string | undefined;
  /** When, for runs whose profile does not say. Default `off`. */
  replies?: VoiceReplies | undefined;
}

/** Longest answer read aloud, in characters (OpenAI's speech input limit is 4096). */
const MAX_SPOKEN_CHARS = 4096;

/** The file a spoken reply in each format becomes. */
const SPOKEN_FILES: Record<VoiceFormat, { name: string; mimeType: string }> = {
  opus: { name: 'reply.ogg', mimeType: 'audio/ogg' },
  aac: { name: 'reply.aac', mimeType: 'audio/aac' },
};

/** Whether this run's answer is spoken: by its profile's `voice`, else the default, and for `when-spoken-to` a voice note among `answering`. */
export function speaks(ctx: RunContext, o: VoiceReplyOptions, answering: ReadonlyArray<Pick<MessageReceived, 'attachments'>>): boolean {
  const mode = ctx.agent.profile?.voice ?? o.replies ?? 'off';
  if (mode === 'always') return true;
  return mode === 'when-spoken-to' && answering.some((m) => m.attachments?.some((a) => a.kind === 'audio'));
}

/**
 * Reads `answer` aloud and sends it as a voice message, once per answer: keyed
 * like the answer's text, by the last message it answers (`answeredSeq`), so a
 * run that answers again (a follow-up of the same run) speaks again. Never
 * throws (the text already went out).
 */
export async function speakAnswer(ctx: RunContext, o: VoiceReplyOptions, answer: string, answeredSeq: number): Promise<void> {
  const send = ctx.delivery.file?.bind(ctx.delivery);
  // A channel that takes no files gets the text alone: no speech is paid for, no notice sent.
  if (!send || !ctx.delivery.fileLimit?.()) return;
  const format = ctx.delivery.voiceFormat?.() ?? 'opus';
  try {
    const { audio } = await generateSpeech({
      model: o.model,
      text: answer.slice(0, MAX_SPOKEN_CHARS),
      outputFormat: format,
      maxRetries: 1,
      abortSignal: ctx.stop.signal,
      ...(o.voice && { voice: o.voice }),
    });
    const sent = await send({ ...SPOKEN_FILES[format], bytes: audio.uint8Array, voice: true }, { key: `${ctx.run.id}:${answeredSeq}:voice` });
    if (sent.outcome !== 'sent') ctx.logger.warn({ outcome: sent.outcome, error: sent.error }, 'spoken reply not sent');
  } catch (err) {
    ctx.logger.warn({ err }, 'spoken reply failed; the answer went out as text');
  }
}
