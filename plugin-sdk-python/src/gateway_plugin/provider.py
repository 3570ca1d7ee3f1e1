"""Provider plugins: the Python counterpart of the Rust SDK's `HttpProvider`.

A provider that answers each completion with one upstream HTTP request subclasses
`HttpProvider`:

- `request(call, stream)` builds the upstream `Request` from the `Call` (the prompt as chat
  messages, the caller's params, the route's base URL, key and settings);
- `body(data, answer)` reads one whole answer into the `Answer` (text, tool calls, finish
  reason, usage); `event(event, answer)` reads one Server-Sent Event or NDJSON line (default:
  `[DONE]` ends the answer, any other data is read with `body`); `message(message, answer)`
  reads one AWS event-stream message (default: an exception fails the call, else the payload
  is read with `body`);
- `FRAMING` names the stream's framing: `"auto"` (by `Content-Type`), `"sse"`, `"ndjson"` or
  `"eventstream"`;
- the drivers (`read_completion`, `read_stream`) do the rest: the status check and error
  mapping, the event loop, text and usage sent to the caller as they arrive (through the host's
  `sink`), a stream cut short reported as an error rather than a short answer;
- the other exports (`embed`, `count_tokens`, `rerank`, `generate_images`, `transcribe`,
  `speak`) are methods with defaults a provider overrides where its API has the endpoint
  (`speak(call, sink)` sends the audio through `sink.send_audio` as it arrives).

The module ends with `WitWorld = provider_world(MyProvider)`: componentize-py exports the class
named `WitWorld` of the app module as the component's `provider` world.
"""

import json
from typing import Any, Literal, Protocol, TypeVar
from collections.abc import Callable, Iterable, Sequence

from componentize_py_types import Err
from wit_world.imports import sink as _sink
from wit_world.imports import types

from . import crash
from .common import (
    finish_reason,
    json_object,
    openai_usage,
    role_name,
    settings_object,
    usage,
)
from .errors import ProviderError, embedded_error, upstream_error
from .eventstream import Message
from .http import Request, Response
from .sse import Event

T = TypeVar("T")

__all__ = [
    "Answer",
    "Call",
    "Event",
    "FRAMINGS",
    "Framing",
    "HttpProvider",
    "Message",
    "Provider",
    "ProviderError",
    "ProviderWorld",
    "Request",
    "Response",
    "Sink",
    "StreamDecoder",
    "embedded_error",
    "finish_reason",
    "openai_usage",
    "provider_world",
    "read_completion",
    "read_stream",
    "types",
    "upstream_error",
    "usage",
]


# ---------------------------------------------------------------------------------- the call


class Call:
    """A completion (or embeddings, rerank, images, transcription or speech) request, already
    validated by the gateway: the WIT record (`call.request`) with the helpers a provider
    needs."""

    def __init__(self, request: Any) -> None:
        self.request = request
        self.route: types.Route = request.route
        self.model: str = request.model

    @property
    def prompt(self) -> types.Prompt:
        prompt: types.Prompt = self.request.prompt
        return prompt

    @property
    def text(self) -> str | None:
        """The prompt of a `type: text` request, `None` for a chat."""
        prompt = self.request.prompt
        return prompt.value if isinstance(prompt, types.Prompt_Text) else None

    def messages(self, provider: str = "this provider") -> list[dict[str, str]]:
        """The prompt as chat messages `{"role", "content"}` (a text prompt is one user
        message), each message's text parts joined with `\\n`. A message with an image, audio
        or a document is refused (400) naming `provider`: this helper is for text-only APIs;
        read `call.prompt` for the parts themselves."""
        prompt = self.request.prompt
        if isinstance(prompt, types.Prompt_Text):
            return [{"role": "user", "content": prompt.value}]
        messages = []
        for message in prompt.value:
            texts = []
            for part in message.parts:
                if isinstance(part, types.Part_Text):
                    texts.append(part.value)
                elif not isinstance(part, types.Part_Reasoning):
                    kind = type(part).__name__.split("_", 1)[-1].lower()
                    raise ProviderError.invalid_request(f"{provider} does not take {kind} parts")
            messages.append({"role": role_name(message.role), "content": "\n".join(texts)})
        return messages

    def params(self, *owned: str) -> dict[str, Any]:
        """The caller's pass-through params (temperature, max_tokens, ...) as a dict, without
        the `owned` keys the plugin sets itself (`model`, `messages`, `stream`, ...)."""
        params = json_object(self.request.params, "params", ProviderError.invalid_request)
        for key in owned:
            params.pop(key, None)
        return params

    def settings(self, **defaults: Any) -> dict[str, Any]:
        """The route's plugin settings (`[providers.ID.settings]`) with `defaults` for the keys
        it leaves out. Given defaults, a key not among them or of another type than its default
        is refused (502 naming the route and the setting), so a misspelt setting is not
        silently ignored."""
        return settings_object(self.route.settings, f"route `{self.route.id}`", defaults)

    def base_url(self, example: str = "https://api.example.com/v1") -> str:
        """The route's `base_url` without trailing slashes; an empty one is the operator's
        mistake, refused saying to set it to `example`."""
        base = self.route.base_url.strip().rstrip("/")
        if not base:
            raise ProviderError.failed(
                f"route `{self.route.id}` has no base_url; set it to {example}"
            )
        return base

    @property
    def api_key(self) -> str | None:
        """The provider key: the caller's `Provider-API-Key`, else the route's configured one."""
        return self.route.api_key

    def secret(self, name: str) -> str | None:
        """What the route's settings name as `NAME_env` (or `NAME_file_env`, then `name` is
        `NAME_file`): the value the gateway read from its environment."""
        for key, value in self.route.secrets:
            if key == name:
                return value
        return None


    @property
    def output(self) -> types.OutputLimit:
        """How much the answer may hold, as the gateway decided and reserved it: `max_tokens` a
        choice (reasoning included; `None` when no limit applies) and `choices`. Write it into
        the upstream body over the caller's params, and name where in `HttpProvider.OUTPUT`."""
        output: types.OutputLimit = self.request.output
        return output


# ---------------------------------------------------------------------------------- output


class OutputFields:
    """Where an upstream body says how long the answer may be: paths of object keys from the
    body's top, e.g. `("generationConfig", "maxOutputTokens")`. `max_tokens` bound each
    choice's tokens (one at least must be present under a limit, none above it); `choices` ask
    for several choices (absent means one)."""

    def __init__(self, max_tokens: Sequence[Sequence[str]], choices: Sequence[Sequence[str]] = ()):
        self.max_tokens = [tuple(p) for p in max_tokens]
        self.choices = [tuple(p) for p in choices]


def _values_at(pairs: Any, path: Sequence[str]) -> list[Any]:
    """Every value at `path` of a body parsed into lists of pairs (every occurrence of a key
    that repeats: an upstream may read either)."""
    if not path:
        return [pairs]
    if not isinstance(pairs, list) or not all(isinstance(p, tuple) for p in pairs):
        return []
    found: list[Any] = []
    for key, value in pairs:
        if key == path[0]:
            found.extend(_values_at(value, path[1:]))
    return found


def check_output(limit: types.OutputLimit, fields: OutputFields | None, body: bytes) -> None:
    """Refuses (`ProviderError.failed`: the plugin's fault) an upstream `body` that asks for
    more than `limit`, or leaves the answer's length to the provider while the gateway set
    one. Without a limit every body passes. `HttpProvider` calls it before every send."""
    if limit.max_tokens is None:
        return
    if fields is None:
        raise ProviderError.failed(
            "the plugin names no OUTPUT fields, so the gateway's output limit cannot be "
            f"checked ({limit.max_tokens} tokens reserved): the request was not sent"
        )
    try:
        parsed = json.loads(body or b"null", object_pairs_hook=lambda pairs: pairs)
    except ValueError as e:
        raise ProviderError.failed(f"the upstream request is not JSON: {e}") from None

    def count(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    bounded = False
    for paths, most, is_tokens in (
        (fields.max_tokens, limit.max_tokens, True),
        (fields.choices, limit.choices, False),
    ):
        for path in paths:
            for value in _values_at(parsed, path):
                if value is None and not is_tokens:
                    continue
                asked = count(value)
                if asked is None or asked < 0 or asked > most:
                    raise ProviderError.failed(
                        f"the plugin asked its upstream for {'.'.join(path)} = "
                        f"{json.dumps(value)}, more than the gateway's limit of {most} (which is "
                        "what it reserved): the request was not sent"
                    )
                bounded = bounded or is_tokens
    if not bounded:
        names = " or ".join(".".join(p) for p in fields.max_tokens)
        raise ProviderError.failed(
            f"the plugin left the answer's length to its upstream (no {names}), but the "
            f"gateway reserved {limit.max_tokens} tokens a choice: the request was not sent"
        )


# ---------------------------------------------------------------------------------- the sink


class Sink:
    """Partial results of a streamed completion (`complete_stream`), and the audio of a speech
    (`speak`), delivered to the caller as they arrive."""

    CALLER_GONE = "the caller disconnected"

    def __init__(self, buffered: bool = False) -> None:
        self._buffered = buffered
        self._closed = False
        #: What a `Sink.buffered()` sink received, in order.
        self.sent: list[types.Chunk] = []
        #: The audio a `Sink.buffered()` sink received (`send_audio`), piece by piece.
        self.audio: list[bytes] = []

    @classmethod
    def buffered(cls) -> "Sink":
        """A sink that keeps every chunk in `sent` (and the audio in `audio`) instead of
        sending it: for tests."""
        return cls(buffered=True)

    def send(self, chunk: types.Chunk) -> None:
        """Sends a chunk; raises `ProviderError.failed("the caller disconnected")` once the
        caller is gone: stop working and let it propagate."""
        if self._buffered:
            self.sent.append(chunk)
            return
        if self._closed:
            raise ProviderError.failed(self.CALLER_GONE)
        try:
            _sink.send(chunk)
        except Err:
            self._closed = True
            raise ProviderError.failed(self.CALLER_GONE) from None

    def text(self, index: int, text: str) -> None:
        """Sends new text of choice `index` (nothing for empty text)."""
        if text:
            self.send(types.Chunk([types.TextDelta(index, text)], [], [], None))

    def send_audio(self, data: bytes | bytearray | memoryview) -> None:
        """Sends the next bytes of a speech's audio (`speak`) to the caller, as the upstream
        sends them (nothing for no bytes); raises `ProviderError.failed("the caller
        disconnected")` once the caller is gone: stop working and let it propagate."""
        if not data:
            return
        piece = bytes(data)
        if self._buffered:
            self.audio.append(piece)
            return
        if self._closed:
            raise ProviderError.failed(self.CALLER_GONE)
        try:
            _sink.send_audio(piece)
        except Err:
            self._closed = True
            raise ProviderError.failed(self.CALLER_GONE) from None


# ---------------------------------------------------------------------------------- answers


class _Call:
    __slots__ = ("id", "name", "arguments")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments = ""

    def push(self, id_: str | None, name: str | None, arguments: str | None) -> None:
        # Providers send the id and name with the first piece: the first non-empty one wins.
        if id_ and not self.id:
            self.id = id_
        if name and not self.name:
            self.name = name
        if arguments:
            self.arguments += arguments


class _Choice:
    __slots__ = ("text", "reasoning", "finish", "function_call", "tool_calls", "logprobs")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: dict[int, types.Reasoning] = {}
        self.finish: types.FinishReason | None = None
        self.function_call: _Call | None = None
        self.tool_calls: dict[int, _Call] = {}
        self.logprobs: Any = None


_OPEN, _COMPLETE, _ENDED = 0, 1, 2


class Answer:
    """The answer being read: the completion so far, and what the caller was not sent yet.
    Streamed text, tool-call pieces, reasoning and usage given to it reach the caller after
    each event (by `read_stream`); everything reaches the final completion."""

    def __init__(self, requested_model: str) -> None:
        self._model = requested_model
        self._choices: dict[int, _Choice] = {}
        self._usage: types.Usage | None = None
        self._usage_unsent = False
        self._unsent: list[types.TextDelta] = []
        self._unsent_calls: list[types.ToolCallDelta] = []
        self._unsent_reasoning: list[types.ReasoningDelta] = []
        self._ids_sent: set[tuple[int, int]] = set()
        self._names_sent: set[tuple[int, int]] = set()
        self._progress = _OPEN

    def _choice(self, index: int) -> _Choice:
        choice = self._choices.get(index)
        if choice is None:
            choice = self._choices[index] = _Choice()
        return choice

    def model(self, model: str | None) -> None:
        """The model the upstream says answered (an empty name is ignored; the last wins)."""
        if model:
            self._model = model

    def text(self, choice: int, text: str | None) -> None:
        """Appends `text` to choice `choice` and queues it for the caller. Empty text sends
        nothing but makes the choice part of the answer."""
        self._choice(choice).text.append(text or "")
        if not text:
            return
        last = self._unsent[-1] if self._unsent else None
        if last is not None and last.index == choice:
            last.text += text
        else:
            self._unsent.append(types.TextDelta(choice, text))

    def tool_call(
        self,
        choice: int,
        call: int,
        id: str | None = None,  # noqa: A002 (the WIT field's name)
        name: str | None = None,
        arguments: str | None = None,
    ) -> None:
        """Adds a piece of tool call `call` of choice `choice`: the id and name count once, the
        `arguments` pieces are appended (and queued for the caller)."""
        id_ = id or None
        name = name or None
        self._choice(choice).tool_calls.setdefault(call, _Call()).push(id_, name, arguments)
        key = (choice, call)
        if id_ is not None and key in self._ids_sent:
            id_ = None
        if name is not None and key in self._names_sent:
            name = None
        if id_ is not None:
            self._ids_sent.add(key)
        if name is not None:
            self._names_sent.add(key)
        arguments = arguments or ""
        if id_ is None and name is None and not arguments:
            return
        last = self._unsent_calls[-1] if self._unsent_calls else None
        if (
            last is not None
            and (last.index, last.call) == key
            and (id_ is None or last.id is None)
            and (name is None or last.name is None)
        ):
            last.id = last.id or id_
            last.name = last.name or name
            last.arguments += arguments
        else:
            self._unsent_calls.append(types.ToolCallDelta(choice, call, id_, name, arguments))

    def function_call(
        self, choice: int, name: str | None = None, arguments: str | None = None
    ) -> None:
        """Adds a piece of the legacy single function call of choice `choice`."""
        entry = self._choice(choice)
        if entry.function_call is None:
            entry.function_call = _Call()
        entry.function_call.push(None, name, arguments)

    def reasoning(
        self,
        choice: int,
        block: int,
        text: str = "",
        signature: str | None = None,
        redacted: str | None = None,
    ) -> None:
        """Appends `text` to reasoning block `block` of choice `choice` (and its signature or
        hidden content when they come), and queues it for the caller."""
        blocks = self._choice(choice).reasoning
        entry = blocks.get(block)
        if entry is None:
            entry = blocks[block] = types.Reasoning("", None, None)
        entry.text += text
        if signature is not None:
            entry.signature = signature
        if redacted is not None:
            entry.redacted = redacted
        if not text and signature is None and redacted is None:
            return
        last = self._unsent_reasoning[-1] if self._unsent_reasoning else None
        if (
            last is not None
            and (last.index, last.block) == (choice, block)
            and last.signature is None
            and last.redacted is None
        ):
            last.text += text
            last.signature = signature
            last.redacted = redacted
        else:
            delta = types.ReasoningDelta(choice, block, text, signature, redacted)
            self._unsent_reasoning.append(delta)

    def finish_reason(self, choice: int, reason: Any) -> None:
        """Why choice `choice` ended: a name (`"stop"`, OpenAI's spelling) or a WIT value."""
        if isinstance(reason, str):
            reason = finish_reason(reason)
        self._choice(choice).finish = reason

    def usage(self, value: types.Usage | None) -> None:
        """The usage so far (the last value wins: providers report totals), queued for the
        gateway so that a stream cut short is still recorded with what it used."""
        if value is not None:
            self._usage = value
            self._usage_unsent = True

    def logprobs(self, choice: int, value: Any) -> None:
        """Adds logprobs of choice `choice`: arrays are concatenated with earlier pieces."""
        if value is None:
            return
        entry = self._choice(choice)
        if isinstance(entry.logprobs, dict) and isinstance(value, dict):
            for key, piece in value.items():
                have = entry.logprobs.get(key)
                if isinstance(have, list) and isinstance(piece, list):
                    have.extend(piece)
                elif have is None:
                    entry.logprobs[key] = piece
        elif entry.logprobs is None:
            entry.logprobs = value

    def complete(self) -> None:
        """The upstream said the answer is whole; later events are still read."""
        self._progress = max(self._progress, _COMPLETE)

    def end(self) -> None:
        """The upstream's end marker: the answer is whole and no more events are read."""
        self._progress = _ENDED

    @property
    def is_complete(self) -> bool:
        return self._progress >= _COMPLETE

    @property
    def is_ended(self) -> bool:
        return self._progress == _ENDED

    def take_unsent(self) -> types.Chunk | None:
        """The text, reasoning, tool-call pieces and usage the caller was not sent yet."""
        usage_now = self._usage if self._usage_unsent else None
        self._usage_unsent = False
        if not (self._unsent or self._unsent_reasoning or self._unsent_calls or usage_now):
            return None
        chunk = types.Chunk(self._unsent, self._unsent_reasoning, self._unsent_calls, usage_now)
        self._unsent, self._unsent_reasoning, self._unsent_calls = [], [], []
        return chunk

    def finish(self) -> types.Completion:
        """The completion: choices by index, calls without an id given `call_{choice}_{n}`, and
        `function_call` mirroring the first tool call when a choice has none."""
        choices = []
        for index in sorted(self._choices):
            entry = self._choices[index]
            calls = []
            for position, key in enumerate(sorted(entry.tool_calls)):
                call = entry.tool_calls[key]
                call_id = call.id or f"call_{index}_{position}"
                calls.append(types.ToolCall(call_id, call.name, call.arguments))
            if entry.function_call is not None:
                function_call = entry.function_call
                function = types.FunctionCall(function_call.name, function_call.arguments)
            elif calls:
                function = types.FunctionCall(calls[0].name, calls[0].arguments)
            else:
                function = None
            logprobs = None if entry.logprobs is None else json.dumps(entry.logprobs)
            reasoning = [entry.reasoning[block] for block in sorted(entry.reasoning)]
            choices.append(
                types.Choice(
                    index, "".join(entry.text), reasoning, entry.finish, function, calls, logprobs
                )
            )
        return types.Completion(self._model, choices, self._usage)


class StreamDecoder:
    """One provider's answer format: what `read_completion` and `read_stream` need of it."""

    def body(self, data: bytes, answer: Answer) -> None:
        """Reads a whole answer (or one event's JSON data, by the default `event`). Call
        `answer.complete()` when it is a complete answer."""
        raise NotImplementedError("a StreamDecoder reads answers in `body`")

    def event(self, event: Event, answer: Answer) -> None:
        """Reads one event of a streamed answer: a Server-Sent Event, or one line of an NDJSON
        stream (its `data` the line, its `event` and `id` `None`). Default, for APIs whose
        events each carry a JSON piece of the answer: `data: [DONE]` ends the answer, empty data
        is skipped, any other data is read with `body`."""
        data = event.data.strip()
        if data == "[DONE]":
            answer.end()
        elif data:
            self.body(data.encode(), answer)

    def message(self, message: Message, answer: Answer) -> None:
        """Reads one message of an AWS event stream (as Amazon Bedrock streams), as `event`
        reads one Server-Sent Event. Default: an error the upstream sent in the stream
        (`:message-type` `exception` or `error`, see `Message.exception`) is
        `ProviderError.failed("<exception type>: <message>")`; any other message's payload is
        read with `body`. Override it to tell events apart by `message.event_type`, or to map
        exceptions to other errors (a throttling exception to an upstream 429)."""
        exception = message.exception()
        if exception is not None:
            raise ProviderError.failed(str(exception))
        self.body(message.payload, answer)

    def end(self, answer: Answer) -> None:
        """Called once after a complete answer, before the completion is built."""


def _send_unsent(answer: Answer, sink: Sink) -> None:
    chunk = answer.take_unsent()
    if chunk is not None:
        sink.send(chunk)


def read_completion(
    response: Response, requested_model: str, decoder: StreamDecoder
) -> types.Completion:
    """A whole answer: the status checked (errors mapped), the body read by `decoder`."""
    response = response.error_for_status()
    answer = Answer(requested_model)
    decoder.body(response.read(), answer)
    decoder.end(answer)
    return answer.finish()


# How a streamed body is framed: `"auto"` (by its `Content-Type`), `"sse"` (Server-Sent
# Events), `"ndjson"` (newline-delimited JSON) or `"eventstream"` (AWS event stream).
Framing = Literal["auto", "sse", "ndjson", "eventstream"]
FRAMINGS: tuple[str, ...] = ("auto", "sse", "ndjson", "eventstream")


def _stream_framing(response: Response, framing: str) -> str:
    """How `read_stream` reads `response`: `"json"` (whole), `"sse"`, `"ndjson"` or
    `"eventstream"`."""
    if framing != "auto":
        return framing
    if response.is_event_stream():
        return "eventstream"
    if response.is_ndjson():
        return "ndjson"
    if response.is_json():
        return "json"
    return "sse"


def _read_events(
    events: Iterable[Any], answer: Answer, sink: Sink, read: Callable[[Any, Answer], None]
) -> None:
    """The event loop, whatever the framing: `read` each event into `answer`, send what it
    added, stop at the end marker."""
    for event in events:
        read(event, answer)
        _send_unsent(answer, sink)
        if answer.is_ended:
            break


def read_stream(
    response: Response,
    sink: Sink,
    requested_model: str,
    decoder: StreamDecoder,
    framing: Framing = "auto",
) -> types.Completion:
    """A streamed answer: the status checked, each event read by `decoder` and what it added
    sent to the caller at once. A stream that ends before the answer is complete is an error.

    `framing` says how the body is cut into events: `"sse"` Server-Sent Events (`event`),
    `"ndjson"` one JSON value a line (`event`, its `data` the line), `"eventstream"` AWS
    event-stream messages (`message`; a malformed frame is `failed`); whatever the body's
    `Content-Type`. `"auto"` (the default) goes by `Content-Type`: an AWS event stream
    (`application/vnd.amazon.eventstream`), NDJSON (`application/x-ndjson`, `application/jsonl`,
    ...: `Response.is_ndjson`), JSON (a server that ignored the request to stream: read whole
    with `body`), anything else SSE."""
    if framing not in FRAMINGS:
        raise ValueError(f"unknown stream framing {framing!r} (known: {', '.join(FRAMINGS)})")
    response = response.error_for_status()
    answer = Answer(requested_model)
    how = _stream_framing(response, framing)
    if how == "json":
        decoder.body(response.read(), answer)
        _send_unsent(answer, sink)
    elif how == "eventstream":
        _read_events(response.event_stream(), answer, sink, decoder.message)
    elif how == "ndjson":
        _read_events(response.ndjson(), answer, sink, decoder.event)
    else:
        _read_events(response.sse(), answer, sink, decoder.event)
    if not answer.is_complete:
        raise ProviderError.failed("stream ended early")
    decoder.end(answer)
    return answer.finish()


# ---------------------------------------------------------------------------------- providers


class HttpProvider(StreamDecoder):
    """A provider answering each completion with one upstream HTTP request.

    Set `NAME`, `VERSION` and `MODELS` (rows of `(model, input $/Mtok, output $/Mtok)`),
    implement `request` and `body` (and `event` when the stream's events are not each a JSON
    piece of the answer, `message` for an AWS event stream), and set `FRAMING` when the stream
    is not told by its `Content-Type`. A fresh instance serves each call, so attributes set
    while reading an answer are that call's decoder state.
    """

    NAME = "python-provider"
    VERSION = "0.1.0"
    MODELS: Sequence[tuple[str, float, float]] = ()

    def info(self) -> types.PluginInfo:
        """Describes the plugin; called once when the gateway loads it."""
        models = [types.ModelPrice(m, float(i), float(o)) for m, i, o in self.MODELS]
        return types.PluginInfo(self.NAME, self.VERSION, models)

    # Where the bodies `request` builds say how long the answer may be: the drivers refuse to
    # send one that asks for more than `call.output` (see `check_output`), so `request` writes
    # that limit there. `None` (not named) is refused whenever the gateway sets a limit.
    OUTPUT: OutputFields | None = None

    # How `complete_stream` cuts the streamed body into events (see `read_stream`): `"auto"`
    # by `Content-Type`; `"sse"`, `"ndjson"` or `"eventstream"` whatever the `Content-Type` says.
    FRAMING: Framing = "auto"

    def request(self, call: Call, stream: bool) -> Request:
        """The upstream request for `call`, asking for an event stream when `stream`, for no
        more than `call.output`."""
        raise NotImplementedError("an HttpProvider builds its upstream request in `request`")

    def decoder(self) -> StreamDecoder:
        """Reads this call's answer; default: the provider itself (fresh for every call)."""
        return self

    def _checked_request(self, call: Call, stream: bool) -> Request:
        request = self.request(call, stream)
        check_output(call.output, self.OUTPUT, request.body)
        return request

    def complete(self, call: Call) -> types.Completion:
        response = self._checked_request(call, False).send_logged()
        return read_completion(response, call.model, self.decoder())

    def complete_stream(self, call: Call, sink: Sink) -> types.Completion:
        response = self._checked_request(call, True).send_logged()
        return read_stream(response, sink, call.model, self.decoder(), self.FRAMING)

    def embed(self, call: Call) -> types.Embeddings:
        """Embeddings, one vector per `call.request.input`; default: not supported (400)."""
        raise ProviderError.invalid_request(f"{self.NAME} does not support embeddings")

    def count_tokens(self, call: Call) -> types.TokenCount | None:
        """How many tokens `call`'s prompt takes, asked of the provider where it has an endpoint
        for it; default: `None`, the gateway counts (with the model's tokenizer where it has it,
        an estimate otherwise)."""
        return None

    def rerank(self, call: Call) -> types.Reranking:
        """`call.request.documents` ordered by their relevance to `call.request.query`, the most
        relevant first, at most `call.request.top_n` of them (`types.Reranking` of
        `types.RerankResult(index, relevance_score)`); default: not supported (400)."""
        raise ProviderError.invalid_request(f"{self.NAME} does not support rerank")

    def generate_images(self, call: Call) -> types.Images:
        """`call.request.n` images made from `call.request.prompt` (`types.Images` of
        `types.GeneratedImage(source, media_type, revised_prompt)`, the source
        `types.Source_Bytes(bytes)` or `types.Source_Url(url)`); default: not supported (400)."""
        raise ProviderError.invalid_request(f"{self.NAME} does not support image generation")

    def transcribe(self, call: Call) -> types.Transcription:
        """`call.request.audio` (the file's bytes, with `file_name`, `media_type`, `translate`
        and the caller's other form fields in `params`) written down: `types.Transcription(model,
        text, language, duration, segments, words, usage, seconds)`, the segments and words
        `types.TranscriptSegment(start, end, text)`; default: not supported (400)."""
        raise ProviderError.invalid_request(f"{self.NAME} does not support transcription")

    def speak(self, call: Call, sink: Sink) -> types.Speech:
        """`call.request.input` spoken in `call.request.voice`, as `call.request.format` (`mp3`,
        `opus`, `aac`, `flac`, `wav` or `pcm`; the caller's other keys, `speed`,
        `instructions`..., in `params`): the audio sent through `sink.send_audio` as the
        upstream sends it, then `types.Speech(model, usage)` (the tokens where the provider
        bills speech by them, else `None`); default: not supported (400)."""
        raise ProviderError.invalid_request(f"{self.NAME} does not support speech")


def run(action: Callable[[], T]) -> T:
    """Runs an export: a `ProviderError` becomes the WIT error the gateway expects; any other
    exception is a bug, logged once and ending the instance (`crash.end`: the caller gets the
    gateway's `plugin_error`, 502)."""
    try:
        return action()
    except ProviderError as e:
        raise Err(e.to_wit()) from None
    except Err:
        raise
    except BaseException as e:  # noqa: BLE001 (every exception ends the call)
        crash.end(e)


class Provider(Protocol):
    """What `provider_world` exports: an `HttpProvider`, or any class with these methods (a
    fresh instance serves each call)."""

    def info(self) -> types.PluginInfo: ...

    def complete(self, call: Call) -> types.Completion: ...

    def complete_stream(self, call: Call, sink: Sink) -> types.Completion: ...

    def embed(self, call: Call) -> types.Embeddings: ...

    # Optional: `count_tokens(call) -> types.TokenCount | None`; without it, the gateway counts.
    # Optional: `rerank(call) -> types.Reranking`; without it, "<name> does not support rerank"
    # (400), as `HttpProvider.rerank`.
    # Optional: `generate_images(call) -> types.Images`; without it, "<name> does not support
    # image generation" (400), as `HttpProvider.generate_images`.
    # Optional: `transcribe(call) -> types.Transcription`; without it, "<name> does not support
    # transcription" (400), as `HttpProvider.transcribe`.
    # Optional: `speak(call, sink) -> types.Speech`, the audio sent with `sink.send_audio`;
    # without it, "<name> does not support speech" (400), as `HttpProvider.speak`.


class ProviderWorld(Protocol):
    """The `provider` world's exports, as the gateway calls them (WIT records in and out; a
    `ProviderError` raised as `Err`)."""

    def info(self) -> types.PluginInfo: ...

    def complete(self, request: types.CompletionRequest) -> types.Completion: ...

    def complete_stream(self, request: types.CompletionRequest) -> types.Completion: ...

    def embed(self, request: types.EmbeddingRequest) -> types.Embeddings: ...

    def count_tokens(self, request: types.CompletionRequest) -> types.TokenCount | None: ...

    def rerank(self, request: types.RerankRequest) -> types.Reranking: ...

    def generate_images(self, request: types.ImageRequest) -> types.Images: ...

    def transcribe(self, request: types.TranscriptionRequest) -> types.Transcription: ...

    def speak(self, request: types.SpeechRequest) -> types.Speech: ...


def provider_world(provider: Callable[[], Provider]) -> type[ProviderWorld]:
    """The `WitWorld` class componentize-py exports for `provider` (an `HttpProvider`, or any
    class with `info`, `complete(call)`, `complete_stream(call, sink)`, `embed(call)` and,
    optionally, `count_tokens(call)`, `rerank(call)`, `generate_images(call)`,
    `transcribe(call)` and `speak(call, sink)`):

        WitWorld = provider_world(MyProvider)
    """

    def optional(method: str, what: str, request: Any, *rest: Any) -> Any:
        """An export a provider may leave out: its answer (to the call, and `rest`: `speak`'s
        sink), or the 400 a provider without it gives (as `HttpProvider`'s defaults do)."""
        instance = provider()
        function = getattr(instance, method, None)
        if function is None:
            raise ProviderError.invalid_request(f"{instance.info().name} does not support {what}")
        return function(Call(request), *rest)

    class WitWorld:
        def info(self) -> types.PluginInfo:
            return run(lambda: provider().info())

        def complete(self, request: types.CompletionRequest) -> types.Completion:
            return run(lambda: provider().complete(Call(request)))

        def complete_stream(self, request: types.CompletionRequest) -> types.Completion:
            return run(lambda: provider().complete_stream(Call(request), Sink()))

        def embed(self, request: types.EmbeddingRequest) -> types.Embeddings:
            return run(lambda: provider().embed(Call(request)))

        def count_tokens(self, request: types.CompletionRequest) -> types.TokenCount | None:
            def count() -> types.TokenCount | None:
                instance = provider()
                counter = getattr(instance, "count_tokens", None)
                return counter(Call(request)) if counter is not None else None

            return run(count)

        def rerank(self, request: types.RerankRequest) -> types.Reranking:
            reranking: types.Reranking = run(lambda: optional("rerank", "rerank", request))
            return reranking

        def generate_images(self, request: types.ImageRequest) -> types.Images:
            images: types.Images = run(
                lambda: optional("generate_images", "image generation", request)
            )
            return images

        def transcribe(self, request: types.TranscriptionRequest) -> types.Transcription:
            transcription: types.Transcription = run(
                lambda: optional("transcribe", "transcription", request)
            )
            return transcription

        def speak(self, request: types.SpeechRequest) -> types.Speech:
            speech: types.Speech = run(lambda: optional("speak", "speech", request, Sink()))
            return speech

    WitWorld.__qualname__ = WitWorld.__name__ = "WitWorld"
    return WitWorld
