// A JavaScript plugin that misbehaves, by the prompt's text: `throw...` has a bug (a `TypeError`
// whose message quotes the prompt escapes the plugin), `refuse` refuses the request as invalid (a
// deliberate 400); anything else loops until the gateway's CPU budget (`cpu_time_ms`) stops it.
// For the tests of JavaScript plugins (tests/e2e/plugins/js.rs).
import { ProviderError, exportProvider, usage } from 'gateway-plugin-sdk';

function spin() {
  let turns = 0;
  for (;;) {
    turns += 1;
  }
}

function settingOf(settings, prompt) {
  // `settings.entries` is undefined: reading a field of it throws, naming the field.
  const entries = settings.entries;
  return entries[prompt];
}

function misbehave(request) {
  const prompt = request.prompt.tag === 'text' ? request.prompt.val : '';
  if (prompt.startsWith('throw')) {
    return settingOf({}, prompt);
  }
  if (prompt === 'refuse') {
    throw ProviderError.invalidRequest('js-hostile refuses this temperature');
  }
  return spin();
}

export const {
  info,
  complete,
  completeStream,
  embed,
  countTokens,
  rerank,
  generateImages,
  transcribe,
  speak,
} = exportProvider({
  info: () => ({ name: 'js-hostile', version: '0.1.0', models: [] }),
  complete: (request) => misbehave(request),
  completeStream: (request) => misbehave(request),
  embed: () => ({ model: 'none', vectors: [], usage: usage(0, 0) }),
});
