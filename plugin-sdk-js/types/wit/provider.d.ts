/// <reference path="./interfaces/gateway-provider-http.d.ts" />
/// <reference path="./interfaces/gateway-provider-kv.d.ts" />
/// <reference path="./interfaces/gateway-provider-log.d.ts" />
/// <reference path="./interfaces/gateway-provider-sink.d.ts" />
/// <reference path="./interfaces/gateway-provider-types.d.ts" />
declare module 'gateway:provider/provider@0.2.0' {
  export type PluginInfo = import('gateway:provider/types@0.2.0').PluginInfo;
  export type CompletionRequest = import('gateway:provider/types@0.2.0').CompletionRequest;
  export type Completion = import('gateway:provider/types@0.2.0').Completion;
  export type EmbeddingRequest = import('gateway:provider/types@0.2.0').EmbeddingRequest;
  export type Embeddings = import('gateway:provider/types@0.2.0').Embeddings;
  export type ProviderError = import('gateway:provider/types@0.2.0').ProviderError;
  export type TokenCount = import('gateway:provider/types@0.2.0').TokenCount;
  export type RerankRequest = import('gateway:provider/types@0.2.0').RerankRequest;
  export type Reranking = import('gateway:provider/types@0.2.0').Reranking;
  export type ImageRequest = import('gateway:provider/types@0.2.0').ImageRequest;
  export type Images = import('gateway:provider/types@0.2.0').Images;
  export type TranscriptionRequest = import('gateway:provider/types@0.2.0').TranscriptionRequest;
  export type Transcription = import('gateway:provider/types@0.2.0').Transcription;
  export type SpeechRequest = import('gateway:provider/types@0.2.0').SpeechRequest;
  export type Speech = import('gateway:provider/types@0.2.0').Speech;
  export type * as GatewayProviderHttp020 from 'gateway:provider/http@0.2.0'; // import gateway:provider/http@0.2.0
  export type * as GatewayProviderKv020 from 'gateway:provider/kv@0.2.0'; // import gateway:provider/kv@0.2.0
  export type * as GatewayProviderLog020 from 'gateway:provider/log@0.2.0'; // import gateway:provider/log@0.2.0
  export type * as GatewayProviderSink020 from 'gateway:provider/sink@0.2.0'; // import gateway:provider/sink@0.2.0
  export type * as GatewayProviderTypes020 from 'gateway:provider/types@0.2.0'; // import gateway:provider/types@0.2.0
  export function info(): PluginInfo;
  export function complete(request: CompletionRequest): Completion;
  /**
  * Sends text through `sink` as it arrives, then returns the whole completion.
  */
  export function completeStream(request: CompletionRequest): Completion;
  export function embed(request: EmbeddingRequest): Embeddings;
  /**
  * How many tokens `request`'s prompt takes for its model, generating nothing: asked of
  * the provider where it has an endpoint for it. `none` when the plugin cannot say; the
  * host then counts with the model's tokenizer where it has it, and estimates otherwise.
  */
  export function countTokens(request: CompletionRequest): TokenCount | undefined;
  /**
  * `request`'s documents ordered by their relevance to its query, with their scores.
  */
  export function rerank(request: RerankRequest): Reranking;
  /**
  * Images made from `request`'s prompt.
  */
  export function generateImages(request: ImageRequest): Images;
  /**
  * `request`'s audio written down.
  */
  export function transcribe(request: TranscriptionRequest): Transcription;
  /**
  * `request`'s text spoken: the audio through `sink.send-audio` as it arrives, then how
  * the speech ended.
  */
  export function speak(request: SpeechRequest): Speech;
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
