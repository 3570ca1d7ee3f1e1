/// <reference path="./gateway-provider-types.d.ts" />
declare module 'gateway:provider/sink@0.2.0' {
  /**
   * Sends new text, reasoning and tool-call pieces to the caller. The completion
   * `complete-stream` returns still carries all of them whole. An error means
   * the caller is gone: stop and return.
   */
  export function send(chunk: Chunk): void;
  /**
   * Sends the next bytes of `speak`'s audio to the caller, as the provider sends them.
   * An error means the caller is gone: stop and return.
   */
  export function sendAudio(bytes: Uint8Array): void;
  export type Chunk = import('gateway:provider/types@0.2.0').Chunk;
}
