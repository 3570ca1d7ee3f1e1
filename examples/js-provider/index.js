// A complete provider for an OpenAI-compatible chat API in JavaScript: text, chat, streaming,
// usage, embeddings. Build: `cargo xtask plugin js examples/js-provider` (writes js-provider.wasm).
import {
  HttpProvider,
  ProviderError,
  Request,
  checkedBaseUrl,
  exportProvider,
  finishReason,
  messages,
  openAiUsage,
  paramsObject,
  textOnly,
} from 'gateway-plugin-sdk';

class OpenAiCompatible extends HttpProvider {
  static OUTPUT = { maxTokens: [['max_tokens'], ['max_completion_tokens']], choices: [['n']] };

  info() {
    return { name: 'js-provider', version: '0.1.0', models: [] };
  }

  /** The caller's params, the model and the prompt as chat messages. */
  request(call, stream) {
    const body = paramsObject(call.params, ['model', 'messages', 'stream', 'stream_options']);
    body.model = call.model;
    body.messages = messages(call.prompt).map((message) => ({
      role: message.role,
      content: textOnly(message, 'js-provider'),
    }));
    body.stream = stream;
    if (call.output?.maxTokens !== undefined) {
      // What the gateway reserved: ask for no more, under every name the API reads.
      delete body.max_completion_tokens;
      body.max_tokens = call.output.maxTokens;
      body.n = call.output.choices;
    }
    if (stream) {
      body.stream_options = { include_usage: true };
    }
    const base = checkedBaseUrl(call.route, 'http://HOST/v1');
    return Request.post(`${base}/chat/completions`)
      .streaming(stream)
      .apiKey(call.route.apiKey)
      .json(body);
  }

  /** Reads an answer (`choices[0].message`) or one stream event (`choices[0].delta`); the
   * default `event` handles `[DONE]`. */
  body(body, answer) {
    let reply;
    try {
      reply = JSON.parse(body);
    } catch (error) {
      throw ProviderError.malformed(error);
    }
    const choice = reply.choices?.[0];
    answer.model(reply.model);
    answer.text(0, choice?.message?.content ?? choice?.delta?.content ?? '');
    if (choice?.finish_reason) {
      answer.finishReason(0, finishReason(choice.finish_reason));
      answer.complete();
    }
    answer.usage(openAiUsage(reply.usage));
  }

  embed(call) {
    const base = checkedBaseUrl(call.route, 'http://HOST/v1');
    const body = { ...paramsObject(call.params, ['input']), model: call.model, input: call.input };
    const reply = Request.post(`${base}/embeddings`)
      .apiKey(call.route.apiKey)
      .json(body)
      .send()
      .errorForStatus()
      .json();
    const vectors = [];
    for (const item of reply.data ?? []) {
      vectors[item.index] = Float32Array.from(item.embedding);
    }
    return { model: reply.model ?? call.model, vectors, usage: openAiUsage(reply.usage) };
  }
}

export const {
  info, complete, completeStream, embed, countTokens, rerank, generateImages, transcribe, speak,
} = exportProvider(new OpenAiCompatible());
