declare module 'gateway:provider/types@0.2.0' {
  /**
   * # Variants
   * 
   * ## `"system"`
   * 
   * ## `"user"`
   * 
   * ## `"assistant"`
   * 
   * ## `"function"`
   * 
   * ## `"tool"`
   */
  export type Role = 'system' | 'user' | 'assistant' | 'function' | 'tool';
  /**
   * A function the model asked to call. `arguments` is JSON text as the model wrote it.
   */
  export interface FunctionCall {
    name: string,
    arguments: string,
  }
  /**
   * A function call in the OpenAI `tool_calls` shape.
   */
  export interface ToolCall {
    id: string,
    name: string,
    arguments: string,
  }
  /**
   * Where a part's bytes are: in the request, or at a URL the provider fetches itself.
   */
  export type Source = SourceBytes | SourceUrl;
  /**
   * The bytes themselves, decoded (never base64 text).
   */
  export interface SourceBytes {
    tag: 'bytes',
    val: Uint8Array,
  }
  /**
   * An `https:` URL, or a provider's own file reference (`gs://...`).
   */
  export interface SourceUrl {
    tag: 'url',
    val: string,
  }
  export interface Image {
    source: Source,
    /**
     * `image/png`, `image/jpeg`, ...: always set with `bytes`.
     */
    mediaType?: string,
    /**
     * How closely the model should look, as OpenAI names it: `auto`, `low` or `high`.
     */
    detail?: string,
  }
  export interface Audio {
    /**
     * The clip, decoded.
     */
    data: Uint8Array,
    /**
     * Its format, as OpenAI names it: `wav`, `mp3`, ...
     */
    format: string,
  }
  export interface Document {
    source: Source,
    /**
     * `application/pdf`, `text/plain`, ...: always set with `bytes`.
     */
    mediaType?: string,
    /**
     * The file's name or title, when the caller gave one.
     */
    title?: string,
  }
  /**
   * The model's reasoning, as the provider gave it. An assistant message of an
   * earlier turn carries it back unchanged, so that a provider can check it.
   */
  export interface Reasoning {
    /**
     * The reasoning or its summary, as readable text; may be empty.
     */
    text: string,
    /**
     * The provider's signature over `text` (Anthropic's `signature`).
     */
    signature?: string,
    /**
     * Reasoning the provider does not show, as opaque text to send back as it
     * came (Anthropic's `redacted_thinking` data, OpenAI's `encrypted_content`).
     */
    redacted?: string,
  }
  /**
   * One piece of a message's content.
   */
  export type Part = PartText | PartImage | PartAudio | PartDocument | PartReasoning;
  export interface PartText {
    tag: 'text',
    val: string,
  }
  export interface PartImage {
    tag: 'image',
    val: Image,
  }
  export interface PartAudio {
    tag: 'audio',
    val: Audio,
  }
  export interface PartDocument {
    tag: 'document',
    val: Document,
  }
  /**
   * On assistant messages: what the model reasoned before it answered.
   */
  export interface PartReasoning {
    tag: 'reasoning',
    val: Reasoning,
  }
  export interface Message {
    role: Role,
    /**
     * The content, in order; empty when the message has none (an assistant
     * message that only called tools).
     */
    parts: Array<Part>,
    /**
     * The function's name on `function` and `tool` messages; the author's name otherwise.
     */
    name?: string,
    /**
     * On assistant messages that called a function.
     */
    functionCall?: FunctionCall,
    /**
     * On assistant messages that called tools.
     */
    toolCalls: Array<ToolCall>,
    /**
     * On `tool` messages: the call this message answers.
     */
    toolCallId?: string,
    /**
     * On `tool` messages: the tool failed, and `content` says how.
     */
    isError: boolean,
  }
  export interface FunctionDef {
    name: string,
    description?: string,
    /**
     * JSON Schema of the arguments, as JSON text.
     */
    parameters?: string,
  }
  export type FunctionChoice = FunctionChoiceNone | FunctionChoiceAuto | FunctionChoiceRequired | FunctionChoiceNamed;
  export interface FunctionChoiceNone {
    tag: 'none',
  }
  export interface FunctionChoiceAuto {
    tag: 'auto',
  }
  /**
   * The model must call some function.
   */
  export interface FunctionChoiceRequired {
    tag: 'required',
  }
  /**
   * The model must call this function.
   */
  export interface FunctionChoiceNamed {
    tag: 'named',
    val: string,
  }
  export type Prompt = PromptText | PromptChat;
  /**
   * `type: "text"`: a single prompt string.
   */
  export interface PromptText {
    tag: 'text',
    val: string,
  }
  /**
   * `type: "chat"`: a conversation.
   */
  export interface PromptChat {
    tag: 'chat',
    val: Array<Message>,
  }
  /**
   * The gateway route serving the request, from the operator's config.
   */
  export interface Route {
    /**
     * The route id callers name in `providerConfig.provider`.
     */
    id: string,
    /**
     * Base URL of the upstream API, without a trailing slash. Empty when the route has none.
     * The host's HTTP import refuses every other host.
     */
    baseUrl: string,
    /**
     * The provider key: the caller's `Provider-API-Key`, else the route's configured key.
     */
    apiKey?: string,
    /**
     * The route's plugin-specific settings from the config, as a JSON object.
     */
    settings: string,
    /**
     * What the route's settings name in the host's environment, read when the route
     * is loaded: for a setting `NAME_env = "VAR"`, (`NAME`, the value of `VAR`); for
     * `NAME_file_env = "VAR"`, (`NAME_file`, the content of the file whose path `VAR`
     * holds). A variable that is unset (or a file that cannot be read) gives no entry.
     * Only the values the route names are passed; the host keeps them out of its logs,
     * answers and records.
     */
    secrets: Array<[string, string]>,
  }
  /**
   * How hard a reasoning model should think, as OpenAI names it.
   * # Variants
   * 
   * ## `"none"`
   * 
   * ## `"minimal"`
   * 
   * ## `"low"`
   * 
   * ## `"medium"`
   * 
   * ## `"high"`
   * 
   * ## `"xhigh"`
   */
  export type ReasoningEffort = 'none' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh';
  /**
   * The caller's wish for the model's reasoning. A plugin maps whichever is
   * set to what its provider takes (an effort, or a token budget).
   */
  export interface ReasoningConfig {
    effort?: ReasoningEffort,
    /**
     * At most this many tokens of reasoning (Anthropic's `budget_tokens`,
     * Gemini's `thinkingBudget`).
     */
    budgetTokens?: number,
  }
  /**
   * How much the answer may hold, as the host decided it (from the caller's
   * `max_tokens` / `max_completion_tokens` / `n`, a reasoning budget, and the
   * limits the request's tokens and cost are reserved against). The host
   * reserved exactly this, so a plugin asks its upstream for no more than it,
   * whatever `params` say (the Rust SDK refuses to send a request that asks for
   * more).
   */
  export interface OutputLimit {
    /**
     * The most completion tokens of each choice, reasoning included: the
     * upstream is asked for exactly this, and any reasoning budget fits in
     * it. `none` when the caller set none and no limit counts tokens or cost
     * (the plugin's or the provider's default applies).
     */
    maxTokens?: number,
    /**
     * The most choices the answer may have (OpenAI's `n`): 1 unless the
     * caller asked for more.
     */
    choices: number,
  }
  export interface CompletionRequest {
    route: Route,
    model: string,
    prompt: Prompt,
    functions: Array<FunctionDef>,
    functionChoice?: FunctionChoice,
    /**
     * Set when the caller asked for reasoning (or asked for none).
     */
    reasoning?: ReasoningConfig,
    /**
     * The answer's size, which the plugin keeps to.
     */
    output: OutputLimit,
    /**
     * Every other key of `providerConfig.params` (temperature, max_tokens, stop, ...) as a JSON object.
     */
    params: string,
  }
  export type FinishReason = FinishReasonStop | FinishReasonLength | FinishReasonFunctionCall | FinishReasonToolCalls | FinishReasonContentFilter | FinishReasonStopSequence | FinishReasonPause | FinishReasonRefusal | FinishReasonOther;
  export interface FinishReasonStop {
    tag: 'stop',
  }
  export interface FinishReasonLength {
    tag: 'length',
  }
  export interface FinishReasonFunctionCall {
    tag: 'function-call',
  }
  export interface FinishReasonToolCalls {
    tag: 'tool-calls',
  }
  export interface FinishReasonContentFilter {
    tag: 'content-filter',
  }
  /**
   * The model wrote one of the request's stop sequences: this one.
   */
  export interface FinishReasonStopSequence {
    tag: 'stop-sequence',
    val: string,
  }
  /**
   * The provider paused a long turn; sending the conversation back continues
   * it (Anthropic's `pause_turn`).
   */
  export interface FinishReasonPause {
    tag: 'pause',
  }
  /**
   * The model declined to answer (Anthropic's `refusal`).
   */
  export interface FinishReasonRefusal {
    tag: 'refusal',
  }
  export interface FinishReasonOther {
    tag: 'other',
  }
  export interface Usage {
    promptTokens: number,
    completionTokens: number,
    totalTokens: number,
    /**
     * Prompt tokens served from the provider's cache (included in `prompt-tokens`).
     */
    cachedPromptTokens?: number,
    /**
     * Prompt tokens written to the provider's cache (included in `prompt-tokens`).
     */
    cacheCreationTokens?: number,
    /**
     * Reasoning tokens (included in `completion-tokens`).
     */
    reasoningTokens?: number,
    /**
     * Prompt tokens of images (included in `prompt-tokens`), where the provider says.
     */
    imagePromptTokens?: number,
    /**
     * Prompt tokens of audio (included in `prompt-tokens`), where the provider says.
     */
    audioPromptTokens?: number,
  }
  export interface Choice {
    index: number,
    /**
     * The whole text of this choice (also at the end of a stream).
     */
    text: string,
    /**
     * What the model reasoned before `text`, in order (also at the end of a stream).
     */
    reasoning: Array<Reasoning>,
    finishReason?: FinishReason,
    functionCall?: FunctionCall,
    toolCalls: Array<ToolCall>,
    /**
     * The provider's logprobs object as JSON text.
     */
    logprobs?: string,
  }
  export interface Completion {
    /**
     * The model that answered, as the provider names it.
     */
    model: string,
    choices: Array<Choice>,
    usage?: Usage,
  }
  /**
   * New text for one choice of a streamed completion.
   */
  export interface TextDelta {
    index: number,
    text: string,
  }
  /**
   * A piece of the model's reasoning, as it streams.
   */
  export interface ReasoningDelta {
    /**
     * The choice.
     */
    index: number,
    /**
     * The reasoning block's position among the choice's: a model may reason
     * again after a tool call.
     */
    block: number,
    /**
     * The next piece of the block's text (may be empty).
     */
    text: string,
    /**
     * The block's signature, on the piece that carries it (usually its last).
     */
    signature?: string,
    /**
     * A block the provider does not show, whole.
     */
    redacted?: string,
  }
  /**
   * A piece of a tool call the model is writing.
   */
  export interface ToolCallDelta {
    /**
     * The choice.
     */
    index: number,
    /**
     * The call's position among the choice's tool calls.
     */
    call: number,
    /**
     * The call's id, on the first piece that knows it.
     */
    id?: string,
    /**
     * The function's name, on the first piece that knows it.
     */
    name?: string,
    /**
     * The next piece of the arguments' JSON text (may be empty).
     */
    arguments: string,
  }
  /**
   * One step of a streamed completion.
   */
  export interface Chunk {
    deltas: Array<TextDelta>,
    reasoning: Array<ReasoningDelta>,
    toolCalls: Array<ToolCallDelta>,
    /**
     * Usage so far, when the provider reports it mid-stream.
     */
    usage?: Usage,
  }
  export interface EmbeddingRequest {
    route: Route,
    model: string,
    input: Array<string>,
    /**
     * Every other key of `providerConfig.params`, as a JSON object.
     */
    params: string,
  }
  export interface Embeddings {
    model: string,
    /**
     * One vector per input, in input order.
     */
    vectors: Array<Float32Array>,
    usage?: Usage,
  }
  /**
   * Documents to order by their relevance to a query (`POST /v1/rerank`).
   */
  export interface RerankRequest {
    route: Route,
    model: string,
    query: string,
    /**
     * The documents' texts, in the caller's order: a result's `index` points here.
     */
    documents: Array<string>,
    /**
     * Only this many results, the most relevant; `none`: one for every document.
     */
    topN?: number,
    /**
     * Every other key of the caller's body (`max_tokens_per_doc`, ...), as a JSON object.
     */
    params: string,
  }
  export interface RerankResult {
    /**
     * The document's position in the request's `documents`.
     */
    index: number,
    /**
     * How relevant the model judges the document to the query: higher is more relevant.
     */
    relevanceScore: number,
  }
  export interface Reranking {
    /**
     * The model that answered, as the provider names it.
     */
    model: string,
    /**
     * The most relevant first, at most `top-n` of them.
     */
    results: Array<RerankResult>,
    /**
     * The tokens read (as `prompt-tokens`), where the provider reports them.
     */
    usage?: Usage,
    /**
     * The search units the provider bills (Cohere's: one a query of up to 100
     * documents), where it bills by them.
     */
    searchUnits?: number,
  }
  /**
   * Images to make from a text prompt (`POST /v1/images/generations`).
   */
  export interface ImageRequest {
    route: Route,
    model: string,
    prompt: string,
    /**
     * How many images (1 to 10).
     */
    n: number,
    /**
     * Width by height in pixels as OpenAI writes it (`1024x1024`), or `auto`; `none`:
     * the model's default.
     */
    size?: string,
    /**
     * As OpenAI names it (`standard`, `hd`, `low`, `medium`, `high`, `auto`) or as the
     * provider does (`premium`); `none`: the model's default.
     */
    quality?: string,
    /**
     * Every other key of the caller's body (`response_format`, `style`, `background`,
     * `output_format`, `negative_prompt`, `seed`, ...), as a JSON object.
     */
    params: string,
  }
  /**
   * One image a model made.
   */
  export interface GeneratedImage {
    /**
     * Its bytes, or a URL where the provider keeps it for a while (DALL-E's `url`).
     */
    source: Source,
    /**
     * `image/png`, `image/jpeg`, ...: always set with `bytes`.
     */
    mediaType?: string,
    /**
     * The prompt the model drew, when it rewrote the caller's (DALL-E 3).
     */
    revisedPrompt?: string,
  }
  export interface Images {
    /**
     * The model that answered, as the provider names it.
     */
    model: string,
    /**
     * At least one, at most the request's `n`.
     */
    images: Array<GeneratedImage>,
    /**
     * Tokens, where the provider bills images by them (`gpt-image-1`).
     */
    usage?: Usage,
    /**
     * The size the provider made and bills, in the request's terms; `none`: the
     * request's `size`.
     */
    size?: string,
    /**
     * The quality the provider made and bills, in the request's terms; `none`: the
     * request's `quality`.
     */
    quality?: string,
  }
  /**
   * Audio to write down (`POST /v1/audio/transcriptions`), or to write down in English
   * (`POST /v1/audio/translations`).
   */
  export interface TranscriptionRequest {
    route: Route,
    model: string,
    /**
     * The file's bytes, as uploaded.
     */
    audio: Uint8Array,
    /**
     * The file's name, as uploaded (`speech.mp3`): some providers tell its format by it.
     */
    fileName: string,
    /**
     * Its media type, as uploaded (`audio/mpeg`), when the caller gave one.
     */
    mediaType?: string,
    /**
     * Into English, whatever the audio's language (a translation).
     */
    translate: boolean,
    /**
     * Every other field of the caller's form (`language`, `prompt`, `response_format`,
     * `temperature`, `timestamp_granularities`, ...), as a JSON object of strings (a field
     * sent more than once, or named `NAME[]`, as an array of them under `NAME`).
     */
    params: string,
  }
  /**
   * A stretch of a transcript with its times, in seconds from the audio's start.
   */
  export interface TranscriptSegment {
    start: number,
    end: number,
    text: string,
  }
  export interface Transcription {
    /**
     * The model that answered, as the provider names it.
     */
    model: string,
    /**
     * The whole transcript.
     */
    text: string,
    /**
     * The audio's language, where the provider tells it (`english`, `en`).
     */
    language?: string,
    /**
     * The audio's length in seconds, where the provider tells it.
     */
    duration?: number,
    /**
     * The transcript's segments, where the provider gives them (asked for with
     * `response_format` `verbose_json`, `srt` or `vtt`).
     */
    segments: Array<TranscriptSegment>,
    /**
     * Its words with their times, where the provider gives them
     * (`timestamp_granularities` `word`).
     */
    words: Array<TranscriptSegment>,
    /**
     * Tokens, where the provider bills transcriptions by them (`gpt-4o-transcribe`).
     */
    usage?: Usage,
    /**
     * The seconds of audio the provider bills, where it bills by them (Whisper).
     */
    seconds?: number,
  }
  /**
   * Text to speak (`POST /v1/audio/speech`). The audio goes to the caller through
   * `sink.send-audio` as the provider sends it.
   */
  export interface SpeechRequest {
    route: Route,
    model: string,
    /**
     * The text to speak.
     */
    input: string,
    /**
     * The voice, as the provider names it (`alloy`, `coral`, ...).
     */
    voice: string,
    /**
     * The audio's format, as OpenAI names it: `mp3`, `opus`, `aac`, `flac`, `wav` or
     * `pcm` (the host's answer says its media type).
     */
    format: string,
    /**
     * Every other key of the caller's body (`speed`, `instructions`, ...), as a JSON
     * object.
     */
    params: string,
  }
  /**
   * How a speech ended, once its audio was sent.
   */
  export interface Speech {
    /**
     * The model that answered, as the provider names it.
     */
    model: string,
    /**
     * Tokens, where the provider bills speech by them (`gpt-4o-mini-tts`: the text's as
     * `prompt-tokens`, the audio's as `completion-tokens`). The host counts the input's
     * characters itself, for providers that bill by them (`tts-1`).
     */
    usage?: Usage,
  }
  /**
   * How many tokens a request's prompt takes, as its model counts them.
   */
  export interface TokenCount {
    /**
     * The prompt's tokens: its messages, system text, tool definitions and media.
     */
    inputTokens: number,
    /**
     * Whether the number is an estimate (a tokenizer other than the model's, media
     * counted by a rule) rather than the provider's or the model tokenizer's own count.
     */
    estimated: boolean,
  }
  /**
   * The upstream answered with an error status.
   */
  export interface UpstreamError {
    status: number,
    /**
     * The provider's own error message.
     */
    message: string,
    /**
     * From a `retry-after` header, in seconds.
     */
    retryAfter?: number,
  }
  export type ProviderError = ProviderErrorInvalidRequest | ProviderErrorUpstream | ProviderErrorTimeout | ProviderErrorFailed;
  /**
   * The request cannot be served as given (unsupported type, bad parameter).
   */
  export interface ProviderErrorInvalidRequest {
    tag: 'invalid-request',
    val: string,
  }
  export interface ProviderErrorUpstream {
    tag: 'upstream',
    val: UpstreamError,
  }
  /**
   * The upstream did not answer in time.
   */
  export interface ProviderErrorTimeout {
    tag: 'timeout',
    val: string,
  }
  /**
   * Anything else: transport failure, an answer the plugin cannot read.
   */
  export interface ProviderErrorFailed {
    tag: 'failed',
    val: string,
  }
  export interface ModelPrice {
    model: string,
    /**
     * Dollars per million prompt tokens.
     */
    inputPerMtok: number,
    /**
     * Dollars per million completion tokens.
     */
    outputPerMtok: number,
  }
  export interface PluginInfo {
    name: string,
    version: string,
    /**
     * Models the plugin knows, with default prices (routes may override them).
     */
    models: Array<ModelPrice>,
  }
}
