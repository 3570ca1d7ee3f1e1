// A guard that denies requests mentioning a blocked word. Settings: `words`, a list of words,
// matched case-insensitively anywhere in the text.
import { Guard, allow, deny, exportGuard, texts } from 'gateway-plugin-sdk';

class BlockedWords extends Guard {
  static NAME = '{{name}}';
  static VERSION = '0.1.0';

  checkRequest(request) {
    // Defaults make a misspelt setting fail the guard (the gateway then refuses the request)
    // instead of silently guarding nothing.
    const { words } = request.settings({ words: [] });
    // What the model would see: the prompt's text, every message's, or the embedding inputs.
    const seen = texts(request).map((text) => text.toLowerCase());
    const word = words.find((blocked) => seen.some((text) => text.includes(blocked.toLowerCase())));
    // The caller sees the reason: it names the configured word, never the caller's text.
    return word === undefined ? allow() : deny(`the request mentions "${word}"`);
  }

  // Answers are allowed (Guard's default): to check them, override checkResponse(request, answer)
  // and look at texts(answer), one text per choice.
}

export const { info, checkRequest, checkResponse } = exportGuard(BlockedWords);
