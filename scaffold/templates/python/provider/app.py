"""A provider for an invented chat API: `POST {base_url}/generate` answers with one JSON object,
or streams NDJSON (one JSON object a line). Change `request` and `body` to your API's."""

import json

from gateway_plugin.provider import (
    Answer,
    Call,
    HttpProvider,
    OutputFields,
    ProviderError,
    Request,
    provider_world,
    usage,
)


class Provider(HttpProvider):
    NAME = "{{name}}"
    VERSION = "0.1.0"
    # Prices 0: the gateway records tokens but no cost; set dollars per million tokens (input,
    # output) to count it.
    MODELS = [("example-model", 0.0, 0.0)]
    # Where the body caps the answer's length: the SDK refuses to send a request asking for more
    # than the gateway reserved.
    OUTPUT = OutputFields([("max_tokens",)])
    # Lines of JSON, whatever Content-Type the server sends.
    FRAMING = "ndjson"

    def request(self, call: Call, stream: bool) -> Request:
        body = {"model": call.model, "messages": call.messages(self.NAME), "stream": stream}
        if call.output.max_tokens is not None:
            body["max_tokens"] = call.output.max_tokens
        # The route's base_url (the only host the plugin may reach); change the example to your
        # API's.
        base = call.base_url("https://api.example.com/v1")
        return Request.post(f"{base}/generate").api_key(call.api_key).json(body)

    def body(self, data: bytes, answer: Answer) -> None:
        """The whole answer, or one line of the stream: either may carry text, finish_reason
        and usage."""
        try:
            reply = json.loads(data)
        except ValueError as e:
            # The upstream's fault, not a bug of the plugin: a 502 rather than a crash.
            raise ProviderError.malformed(e) from None
        answer.text(0, reply.get("text") or "")
        if reply.get("usage"):
            tokens = reply["usage"]
            answer.usage(usage(tokens.get("input_tokens", 0), tokens.get("output_tokens", 0)))
        if reply.get("finish_reason"):
            answer.finish_reason(0, reply["finish_reason"])
            # A stream that ends before this is cut short: an error, not a short answer.
            answer.complete()


WitWorld = provider_world(Provider)
