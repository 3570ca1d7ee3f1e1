// An author's typed use of the SDK, checked by `tsc -p test/tsconfig.json` (never run): a
// provider, a guard and a tool, and their tests with the fake host.

import {
  Guard,
  HttpProvider,
  ProviderError,
  Request,
  allow,
  checkedBaseUrl,
  deny,
  exportGuard,
  exportProvider,
  exportTools,
  finishReason,
  messages,
  openAiUsage,
  rewrite,
  textOnly,
  type Answer,
  type Chunk,
  type Completion,
  type CompletionRequest,
  type GuardRequest,
  type ImageRequest,
  type Images,
  type Transcription,
  type TranscriptionRequest,
  type PluginInfo,
  type RerankRequest,
  type Reranking,
  type Sink,
  type Speech,
  type SpeechRequest,
  type Verdict,
} from 'gateway-plugin-sdk';
import { Call, GuardCall, ToolCall, json, message, sse } from 'gateway-plugin-sdk/testing';

class Chat extends HttpProvider {
  static override OUTPUT = { maxTokens: [['max_tokens']] };

  info(): PluginInfo {
    return { name: 'chat', version: '1.0.0', models: [{ model: 'm', inputPerMtok: 1, outputPerMtok: 2 }] };
  }

  request(call: CompletionRequest, stream: boolean): Request {
    const body = {
      model: call.model,
      messages: messages(call.prompt).map((m) => ({ role: m.role, content: textOnly(m, 'chat') })),
      max_tokens: call.output.maxTokens,
      stream,
    };
    return Request.post(`${checkedBaseUrl(call.route, 'http://HOST/v1')}/chat`).apiKey(call.route.apiKey).json(body);
  }

  body(body: string, answer: Answer): void {
    const reply = JSON.parse(body) as { text?: string; done?: boolean; usage?: unknown };
    answer.text(0, reply.text ?? '');
    if (reply.done) {
      answer.finishReason(0, finishReason('stop'));
      answer.usage(openAiUsage(reply.usage));
      answer.complete();
    }
  }

  override rerank(call: RerankRequest): Reranking {
    const results = call.documents.map((text, index) => ({ index, relevanceScore: text.length }));
    results.sort((a, b) => b.relevanceScore - a.relevanceScore);
    return { model: call.model, results: results.slice(0, call.topN), searchUnits: 1 };
  }

  override generateImages(call: ImageRequest): Images {
    const images = Array.from({ length: call.n }, (_, i) => ({
      source: { tag: 'bytes' as const, val: new Uint8Array([i]) },
      mediaType: 'image/png',
    }));
    return { model: call.model, images, size: call.size ?? '1024x1024', quality: 'standard' };
  }

  override transcribe(call: TranscriptionRequest): Transcription {
    const text = `${call.audio.length} bytes of ${call.fileName}`;
    const segments = [{ start: 0, end: 1.5, text }];
    return { model: call.model, text, duration: 1.5, segments, words: [], seconds: 2 };
  }

  override speak(call: SpeechRequest, sink: Sink): Speech {
    const body = { model: call.model, input: call.input, voice: call.voice, response_format: call.format };
    const audio = Request.post(`${checkedBaseUrl(call.route, 'http://HOST/v1')}/audio/speech`).json(body).send().errorForStatus();
    for (let piece = audio.chunk(); piece !== undefined; piece = audio.chunk()) {
      sink.sendAudio(piece);
    }
    return { model: call.model, usage: { promptTokens: call.input.length, completionTokens: 1, totalTokens: call.input.length + 1 } };
  }
}

export const provider = exportProvider(new Chat());

class Keys extends Guard {
  static override NAME = 'keys';
  static override VERSION = '1.0.0';

  override checkRequest(request: GuardRequest): Verdict {
    const { mode } = request.settings({ mode: 'rewrite' });
    const texts = request.texts();
    if (!texts.some((t) => t.includes('sk-'))) {
      return allow();
    }
    return mode === 'deny' ? deny('a key') : rewrite(texts.map((t) => t.replaceAll('sk-', '[key]')), { key: 1 });
  }

  override checkResponse(_request: GuardRequest, answer: Completion): Verdict {
    return answer.choices.length > 0 ? allow() : deny('empty');
  }
}

export const guard = exportGuard(Keys);

export const tools = exportTools({
  name: 'weather',
  version: '1.0.0',
  tools: [
    {
      name: 'forecast',
      inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      handler: (args: { city: string }, context) => {
        if (args.city === '') {
          throw ProviderError.invalidRequest('no city');
        }
        return Request.get(`${context.settings({ api: '' }).api}/f?c=${args.city}`).send().text();
      },
    },
  ],
});

const run = Call.text('m', 'hi')
  .baseUrl('https://api.example.com')
  .apiKey('k')
  .output(64)
  .complete(provider, (request) => json(200, { text: request.json().model, done: true }));
const text: string = run.unwrap().choices[0].text;
const sentUrl: string = run.sent[0].url;
const streamed = Call.chat('m', [message('user', 'hi')]).stream(provider, () => sse([{ text: 'a' }, { done: true }]));
const chunks: Chunk[] = streamed.chunks;
const errorTag: string | undefined = run.error?.tag;
const spoken = Call.speech('tts-1', 'hi', 'coral', 'wav').speak(provider, () => json(200, {}));
const audio: Uint8Array = spoken.streamedAudio();
const pieces: Uint8Array[] = spoken.audio;
const speechModel: string | undefined = spoken.result?.model;

const verdict = GuardCall.prompt('sk-1').settings({ mode: 'deny' }).checkRequest(guard).result;
const denied: boolean = verdict?.tag === 'deny';
const answerVerdict = GuardCall.prompt('x').checkResponse(guard, ['a']).unwrap();

const server = ToolCall.server('weather').settings({ api: 'https://w.test' }).allowHosts('w.test');
const listed: string[] = server.listTools(tools).unwrap().map((t) => t.name);
const called = server.callTool(tools, 'forecast', { city: 'Oslo' }, () => json(200, 'rain'));
const content = called.result?.content[0];
const contentText: string | undefined = content?.tag === 'text' ? content.val : undefined;

export const used = [text, sentUrl, chunks, errorTag, audio, pieces, speechModel, denied, answerVerdict, listed, contentText];
