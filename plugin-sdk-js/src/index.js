// The gateway's plugin SDK for JavaScript: everything a provider, tool or guard plugin needs, with
// the component's bindings hidden (the build adds the world's, `wit-WORLD.js`). See README.md.

export { Answer, Sink, readCompletion, readStream } from './answer.js';
export { ProviderError, embeddedError, upstreamError } from './errors.js';
export { Allow, Deny, Guard, GuardRequest, Rewrite, allow, deny, exportGuard, rewrite, texts } from './guard.js';
export { Request, Response } from './http.js';
export { kv } from './kv.js';
export { log } from './log.js';
export { HttpProvider, StreamDecoder, checkOutput, exportProvider } from './provider.js';
export { FRAMINGS } from './answer.js';
export { EventStreamParser, FrameError, Message, MessageException, encodeEventStream } from './eventstream.js';
export { NdjsonParser } from './ndjson.js';
export { SseParser } from './sse.js';
export { InvalidArguments, ToolContext, ToolFailure, ToolResult, exportTools } from './tool.js';
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
