// The gateway's plugin SDK for JavaScript: everything a provider plugin needs, with the
// component's bindings hidden. See README.md.

import './wit.js';

export { Answer, Sink, readCompletion, readStream } from './answer.js';
export { ProviderError, embeddedError, upstreamError } from './errors.js';
export { Request, Response } from './http.js';
export { kv } from './kv.js';
export { log } from './log.js';
export { HttpProvider, StreamDecoder, checkOutput, exportProvider } from './provider.js';
export { SseParser } from './sse.js';
export {
  checkedBaseUrl,
  finishReason,
  messageText,
  messages,
  modelPrices,
  openAiUsage,
  paramsObject,
  routeSettings,
  secret,
  textOnly,
  usage,
} from './values.js';
