"""`python-hostile`: a test-only Python plugin that attacks its own sandbox, so that
`tests/e2e/plugins/python.rs` can show the sandbox holds for Python plugins as it does for
Rust ones (`tests/plugins/hostile`).

The request's model picks the attack:

| model       | behaviour |
|-------------|-----------|
| `loop`      | spins forever in the interpreter, never calling the host |
| `memory`    | allocates 1 MiB blocks, writing each, keeping them all |
| `forbidden` | sends `GET` to `providerConfig.params.url` (default `http://127.0.0.1:1/`), a host the route does not allow; answers `reached URL: HTTP STATUS` if the gateway let it through |
| `raise`     | a bug: looks up a missing key, so a `KeyError` quoting the prompt escapes the plugin |
| `refuse`    | refuses the request as invalid (`ProviderError.invalid_request`), a deliberate 400 |
| `count`     | prints `python-hostile count: PROMPT N` and answers `calls N`: N is how many calls its instance has served, 1 while each call has an instance of its own |
| any other   | answers `ok` |
"""

from gateway_plugin.provider import (
    Answer,
    Call,
    ProviderError,
    Request,
    Sink,
    provider_world,
    types,
)

MODELS = ["loop", "memory", "forbidden", "raise", "refuse", "count", "ok"]
DEFAULT_FORBIDDEN_URL = "http://127.0.0.1:1/"
# Calls this instance has served (`count`).
CALLS = 0


def spin() -> None:
    counter = 0
    while True:
        counter += 1


def memory_bomb() -> None:
    hoard = []
    fill = 1
    while True:
        # bytes() of a repeated byte writes every page: the memory is real, not reserved.
        hoard.append(bytes([fill]) * (1 << 20))
        fill = fill % 255 + 1


def forbidden(call: Call) -> str:
    url = call.params().get("url") or DEFAULT_FORBIDDEN_URL
    response = Request.get(url).send()
    return f"reached {url}: HTTP {response.status}"


def settings_of(call: Call) -> dict:
    # The prompt as a key nobody set: the KeyError's message quotes it.
    return {}[call.text]


def raise_key_error(call: Call) -> str:
    return settings_of(call)["model"]


class Hostile:
    def info(self):
        models = [types.ModelPrice(model, 0.0, 0.0) for model in MODELS]
        return types.PluginInfo("python-hostile", "0.1.0", models)

    def complete(self, call: Call):
        if call.model == "count":
            global CALLS
            CALLS += 1
            print(f"python-hostile count: {call.text} {CALLS}")
            answer = Answer(call.model)
            answer.text(0, f"calls {CALLS}")
            answer.finish_reason(0, "stop")
            return answer.finish()
        if call.model == "loop":
            spin()
        if call.model == "memory":
            memory_bomb()
        if call.model == "raise":
            raise_key_error(call)
        if call.model == "refuse":
            raise ProviderError.invalid_request("python-hostile refuses this temperature")
        text = forbidden(call) if call.model == "forbidden" else "ok"
        answer = Answer(call.model)
        answer.text(0, text)
        answer.finish_reason(0, "stop")
        return answer.finish()

    def complete_stream(self, call: Call, sink: Sink):
        completion = self.complete(call)
        sink.text(0, completion.choices[0].text)
        return completion

    def embed(self, call: Call):
        raise ProviderError.invalid_request("python-hostile does not embed")


WitWorld = provider_world(Hostile)
