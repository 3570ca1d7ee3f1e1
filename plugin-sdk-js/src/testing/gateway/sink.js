// `gateway:provider/sink@0.2.0` under Node: the running call's chunks (see ../index.js).
import { during } from './state.js';

export function send(chunk) {
  during('sink')(chunk);
}
