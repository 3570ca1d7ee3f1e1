// `gateway:provider/http@0.2.0` under Node: the running call's upstream (see ../index.js).
import { during } from './state.js';

export function send(request) {
  return during('http')(request);
}
