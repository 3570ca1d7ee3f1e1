"""An OpenAI-compatible provider in Python: text, chat, streaming and usage.

Route settings: `legacy_completions = true` sends `type: text` prompts to `POST /completions`
(`prompt`) instead of `POST /chat/completions` as one user message.
"""

import json

from gateway_plugin.provider import (
    Answer,
    Call,
    HttpProvider,
    OutputFields,
    ProviderError,
    Request,
    embedded_error,
    openai_usage,
    provider_world,
)

# Body keys the plugin sets itself: no caller param overrides them.
OWNED = ("model", "messages", "prompt", "stream", "stream_options")


class OpenAiCompatible(HttpProvider):
    NAME = "python-provider"
    VERSION = "0.1.0"
    MODELS = [("gpt-4o-mini", 0.15, 0.60), ("gpt-3.5-turbo-instruct", 1.50, 2.00)]
    OUTPUT = OutputFields([("max_tokens",), ("max_completion_tokens",)], [("n",)])

    def request(self, call: Call, stream: bool) -> Request:
        legacy = call.settings(legacy_completions=False)["legacy_completions"]
        legacy = legacy and call.text is not None
        body = call.params(*OWNED)
        body["model"] = call.model
        if legacy:
            body["prompt"] = call.text
        else:
            body["messages"] = call.messages(self.NAME)
        body["stream"] = stream
        if call.output.max_tokens is not None:
            # What the gateway reserved: ask for no more, under every name the API reads.
            body.pop("max_completion_tokens", None)
            body["max_tokens"] = call.output.max_tokens
            body["n"] = call.output.choices
        if stream:
            body["stream_options"] = {"include_usage": True}
        path = "completions" if legacy else "chat/completions"
        url = f"{call.base_url('https://api.openai.com/v1')}/{path}"
        return Request.post(url).streaming(stream).api_key(call.api_key).json(body)

    def body(self, data: bytes, answer: Answer) -> None:
        """A whole answer, or one chunk of a stream (`[DONE]` is the default `event`'s)."""
        try:
            reply = json.loads(data)
        except ValueError as e:
            raise ProviderError.malformed(e) from None
        if reply.get("error") and not reply.get("choices"):
            raise embedded_error(reply["error"])
        answer.model(reply.get("model"))
        answer.usage(openai_usage(reply.get("usage")))
        for choice in reply.get("choices") or []:
            index = choice.get("index") or 0
            message = choice.get("message") or choice.get("delta") or {}
            # Chat answers carry `message.content` (`delta` in a stream), legacy ones `text`.
            answer.text(index, message.get("content") or choice.get("text") or "")
            if choice.get("finish_reason"):
                answer.finish_reason(index, choice["finish_reason"])
                answer.complete()


WitWorld = provider_world(OpenAiCompatible)
