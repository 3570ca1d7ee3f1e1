// `gateway:provider/sink@0.2.0` under Node: the running call's chunks (see ../index.js).
import { during } from './state.js';

export function send(chunk) {
  during('sink')(chunk);
}

export function sendAudio(bytes) {
  // The world's sink first: a guard or a tool has none.
  during('sink');
  during('audio')(bytes);
}
