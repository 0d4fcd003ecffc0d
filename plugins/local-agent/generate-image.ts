/**
 * The built-in `generate_image` tool (opt-in: `images.model`): the AI SDK's
 * image generation on the configured provider, the picture sent natively in
 * the chat through the run's delivery, exactly once per call (its outbox
 * record is keyed by the call's idempotency key). Not idempotent: after a
 * takeover a call that started is reported unknown rather than paid for
 * twice. The tool policy applies by name; a profile's `tools` list can leave
 * it out; a budget's `imagesPerDay` counts each picture before it is made.
 */
import { randomBytes } from 'node:crypto';
import { generateImage, type ImageModel } from 'ai';
import { z } from 'steerbot/plugin';
import { type AgentTool, type RunContext, ToolFailure } from 'steerbot/runner';
import { deliveryAnswer } from './send-file.js';

/** Options of the generate_image tool. */
export interface ImageToolOptions {
  /** The image model (`createImageModel`). */
  model: ImageModel;
  /** Size asked for, e.g. `1024x1024`. Default: the provider's. */
  size?: `${number}x${number}` | undefined;
}

const input = z.object({
  prompt: z.string().trim().min(1).max(4000).describe('What the picture shows, in detail.'),
  caption: z.string().max(1000).optional().describe('Text shown with the picture.'),
});

/** The generate_image tool of one run; none when its delivery cannot send files. */
export function imageTools(ctx: RunContext, o: ImageToolOptions | undefined): AgentTool[] {
  const delivery = ctx.delivery;
  if (!o || !delivery.file) return [];
  const send = delivery.file.bind(delivery);
  const tool: AgentTool<z.infer<typeof input>> = {
    name: 'generate_image',
    description: 'Draws a picture from a description and sends it to the user in this chat.',
    inputSchema: input,
    timeoutMs: 120_000,
    async execute({ prompt, caption }, { signal, call }) {
      // Nothing is paid for that cannot be sent.
      if (!delivery.fileLimit?.()) throw new ToolFailure('unavailable', 'this chat does not take pictures; describe it in words instead');
      // A picture counts against the budgets (`imagesPerDay`) before it is paid for.
      if (await ctx.features.spendingCheck?.('image'))
        throw new ToolFailure('forbidden', 'the spending budget allows no more pictures for now; describe it in words instead');
      const { image } = await generateImage({ model: o.model, prompt, n: 1, maxRetries: 1, abortSignal: signal, ...(o.size && { size: o.size }) });
      const mimeType = image.mediaType ?? 'image/png';
      if (!mimeType.startsWith('image/')) throw new ToolFailure('unavailable', `the image model answered ${mimeType}, not an image`);
      const file = { name: `image.${mimeType.slice('image/'.length).replace('jpeg', 'jpg')}`, mimeType, bytes: image.uint8Array };
      const result = await send({ ...file, ...(caption && { caption }) }, { key: call?.idempotencyKey ?? `i_${randomBytes(12).toString('hex')}` });
      return deliveryAnswer(file, result);
    },
  };
  return [tool];
}
