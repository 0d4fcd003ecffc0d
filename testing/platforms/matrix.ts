/** `steerbot/testing`'s `matrix`: the fake of a Matrix homeserver and its media repository. */
export { type MatrixMedia, MatrixMediaStore, type MediaAnswer, type MediaRoute } from '../fakes/matrix-media.js';
export {
  FakeMatrix,
  type FakeMatrixOptions,
  MATRIX_ALICE,
  MATRIX_BOB,
  MATRIX_TEST,
  type MatrixCall,
  type MatrixCallKind,
  type MatrixEvent,
  type MatrixFailure,
  type MatrixMessageOptions,
  type MatrixPoll,
  type MatrixPollResponseOptions,
  startFakeMatrix,
} from '../fakes/matrix-server.js';
