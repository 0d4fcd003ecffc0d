/** `steerbot/testing`'s `whatsapp`: the fake of the WhatsApp Cloud API. */
export {
  delivery as whatsappDelivery,
  type FakeWhatsApp,
  type FakeWhatsAppOptions,
  type GraphCall,
  type GraphFailure,
  messageDelivery,
  postDelivery,
  signDelivery,
  startFakeWhatsApp,
  statusDelivery,
  WA_ALICE,
  type WaMessageOptions,
  WHATSAPP_TEST,
  type WhatsAppSentMessage,
  wamid,
} from '../fakes/whatsapp-server.js';
