// A provider for an invented chat API: `POST {base_url}/generate` answers with one JSON object, or
// streams NDJSON (one JSON object a line). Change the request and `body` to your API's.
import {
  HttpProvider,
  ProviderError,
  Request,
  checkedBaseUrl,
  exportProvider,
  finishReason,
  messages,
  textOnly,
  usage,
} from 'gateway-plugin-sdk';

class Provider extends HttpProvider {
  // Lines of JSON, whatever Content-Type the server sends.
  static FRAMING = 'ndjson';
  // Where the body caps the answer's length: the SDK refuses to send a request asking for more
  // than the gateway reserved.
  static OUTPUT = { maxTokens: [['max_tokens']] };

  info() {
    // Prices 0: the gateway records tokens but no cost; set dollars per million tokens to count it.
    return {
      name: '{{name}}',
      version: '0.1.0',
      models: [{ model: 'example-model', inputPerMtok: 0, outputPerMtok: 0 }],
    };
  }

  request(call, stream) {
    const body = {
      model: call.model,
      messages: messages(call.prompt).map((message) => ({
        role: message.role,
        content: textOnly(message, '{{name}}'),
      })),
      stream,
    };
    if (call.output.maxTokens !== undefined) {
      body.max_tokens = call.output.maxTokens;
    }
    // The route's base_url (the only host the plugin may reach); change the example to your API's.
    const base = checkedBaseUrl(call.route, 'https://api.example.com/v1');
    return Request.post(`${base}/generate`).apiKey(call.route.apiKey).json(body);
  }

  // The whole answer, or one line of the stream: either may carry text, finish_reason and usage.
  body(body, answer) {
    let reply;
    try {
      reply = JSON.parse(body);
    } catch (error) {
      // The upstream's fault, not a bug of the plugin: a 502 rather than a crash.
      throw ProviderError.malformed(error);
    }
    answer.text(0, reply.text ?? '');
    if (reply.usage) {
      answer.usage(usage(reply.usage.input_tokens ?? 0, reply.usage.output_tokens ?? 0));
    }
    if (reply.finish_reason) {
      answer.finishReason(0, finishReason(reply.finish_reason));
      // A stream that ends before this is cut short: an error, not a short answer.
      answer.complete();
    }
  }
}

export const {
  info, complete, completeStream, embed, countTokens, rerank, generateImages, transcribe, speak,
} = exportProvider(new Provider());
