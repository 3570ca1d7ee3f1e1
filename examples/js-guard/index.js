// A deny-list guard in JavaScript, to compare with `examples/python-guard`: refuses requests whose
// text holds a denied word, and replaces e-mail addresses in the model's answers with `[EMAIL]`.
// Build: `cargo xtask plugin js examples/js-guard` (the package.json's `"gateway": {"world":
// "guard"}` makes it a guard); use: `[guards.ID] plugin = "js-guard"`.
//
// Settings (`[guards.ID] settings = {...}`):
// - `words`: words or phrases, matched case-insensitively as whole words;
// - `redact_emails` (default true): rewrite the e-mail addresses of answers.
//
// A denial names the rule (`words #2`), never the text that matched: what a deny list keeps out is
// often the secret itself. Nor does it name the guard: the gateway does.
import { Guard, allow, deny, exportGuard, rewrite, texts } from 'gateway-plugin-sdk';

const SETTINGS = { words: [], redact_emails: true };
const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g;

const escaped = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
// `\w` lookarounds rather than `\b`, so that a phrase starting or ending in punctuation matches.
const wordPattern = (word) => new RegExp(`(?<!\\w)${escaped(String(word))}(?!\\w)`, 'i');

class DenyList extends Guard {
  static NAME = 'js-guard';
  static VERSION = '0.1.0';

  checkRequest(request) {
    const candidates = texts(request);
    const { words } = request.settings(SETTINGS);
    const rules = words.map((word, n) => [`words #${n + 1}`, wordPattern(word)]);
    const matched = rules.find(([, pattern]) => candidates.some((text) => pattern.test(text)));
    return matched ? deny(`the request matches the deny list (${matched[0]})`) : allow();
  }

  checkResponse(request, answer) {
    if (!request.settings(SETTINGS).redact_emails) {
      return allow();
    }
    let found = 0;
    const redacted = texts(answer).map((text) =>
      text.replace(EMAIL, () => {
        found += 1;
        return '[EMAIL]';
      }),
    );
    return found > 0 ? rewrite(redacted, { email: found }) : allow();
  }
}

export const { info, checkRequest, checkResponse } = exportGuard(DenyList);
