"""A guard that denies requests mentioning a blocked word. Settings: `words`, a list of words,
matched case-insensitively anywhere in the text."""

from gateway_plugin.guard import Guard, GuardRequest, allow, deny, guard_world, texts


class BlockedWords(Guard):
    NAME = "{{name}}"
    VERSION = "0.1.0"

    def check_request(self, request: GuardRequest):
        # Defaults make a misspelt setting fail the guard (the gateway then refuses the request)
        # instead of silently guarding nothing.
        words = request.settings(words=[])["words"]
        # What the model would see: the prompt's text, every message's, or the embedding inputs.
        seen = [text.lower() for text in texts(request)]
        for word in words:
            if any(word.lower() in text for text in seen):
                # The caller sees the reason: it names the configured word, never the caller's text.
                return deny(f'the request mentions "{word}"')
        return allow()

    # Answers are allowed (Guard's default): to check them, override
    # check_response(request, answer) and look at texts(answer), one text per choice.


WitWorld = guard_world(BlockedWords)
