"""Running a plugin natively, without a gateway: the SDK's own fake host, for a plugin's unit
tests (`unittest` or pytest).

`Call` builds the `CompletionRequest` (or `EmbeddingRequest`, `SpeechRequest`) the gateway
would pass; `Call.complete`, `Call.stream` (the `complete-stream` export), `Call.embed` and
`Call.speak` run the plugin's exported `WitWorld` on it, the very class and code path the
gateway calls, with an
upstream of the test's own: a function from each request the plugin sends (`Sent`) to a
response (`json`, `sse`, `ndjson`, `Response.from_chunks`), or to a WIT `http.HttpError_*`
value that fails the send. Every request is recorded, with its headers and body; as in the
gateway, one to a host other than the route's `base_url`'s is refused (`forbidden-host`)
before it reaches the function. `kv` and `log` are a `Host`'s, in memory, readable by the test;
pass the same `Host` to several calls to keep `kv` between them, as a route does.

`Check` does the same for a guard's `check_request` and `check_response`; `ToolCall` for a
tool's `list-tools` and `call-tool`, on a server's context (settings, secrets), its
`allowed_hosts` the only hosts the plugin reaches.

    from gateway_plugin.testing import Call, json
    import app

    run = Call.text("m-1", "hello").base_url("https://api.example.com").api_key("k-1").complete(
        app.WitWorld, lambda request: json(200, {"choices": [...]})
    )
    assert run.result.choices[0].text == "hi"
    assert run.sent[0].url == "https://api.example.com/chat/completions"
    assert run.sent[0].header_value("authorization") == "Bearer k-1"

A `ProviderError` the plugin raises is `run.error` (`run.result` raises it), and so is a tool's
`tool-error`, as a `ToolError`; an exception it does not catch, which would end its instance in
the gateway, is raised to the test as `PluginCrashed`, carrying the line the gateway would log.
"""

from __future__ import annotations

import json as _json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from componentize_py_types import Err
from wit_world.imports import guard_types, tool_types, types
from wit_world.imports import http as _http
from wit_world.imports import kv as _kv
from wit_world.imports import log as _log
from wit_world.imports import sink as _sink

from . import crash
from .errors import ProviderError
from .guard import GuardWorld
from .http import Response
from .provider import ProviderWorld
from .tool import ToolWorld

__all__ = [
    "Call",
    "Check",
    "Checked",
    "Host",
    "PluginCrashed",
    "Response",
    "Run",
    "Sent",
    "ToolCall",
    "ToolError",
    "Upstream",
    "json",
    "message",
    "ndjson",
    "sse",
]

T = TypeVar("T")
E = TypeVar("E", bound=Exception)


class PluginCrashed(Exception):
    """The plugin raised an exception it did not catch: in the gateway its instance would end
    and the caller get a 502 `plugin_error`. `line` is what the gateway would log."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


@dataclass
class Sent:
    """A request the plugin sent, as the gateway's HTTP import received it."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes

    def header_value(self, name: str) -> str | None:
        """The first value of header `name` (any letter case)."""
        lower = name.lower()
        return next((v for n, v in self.headers if n.lower() == lower), None)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.body)


#: A test's upstream: the answer to each request the plugin sends, or a WIT HTTP error
#: (`http.HttpError_Timeout("...")`, `HttpError_Transport`, ...) that fails the send.
Upstream = Callable[[Sent], "Response | _http.HttpError"]


class Host:
    """What the gateway keeps for a plugin across calls, in memory: its `kv` entries (without
    expiry) and the secrets it declared; and the log lines of the calls run with it.

    `log_level` is the least level `log.enabled` says is kept (`"debug"` by default; lines
    below it are still recorded)."""

    def __init__(self, log_level: str = "debug") -> None:
        self.kv: dict[str, bytes] = {}
        self.secrets: list[str] = []
        #: Every line logged, as `(level, message)`, the level's name in lowercase.
        self.logs: list[tuple[str, str]] = []
        self._least = _log.Level[log_level.upper()].value

    def lines(self, level: str | None = None) -> list[str]:
        """The messages logged (at `level` only, when given)."""
        return [m for lvl, m in self.logs if level is None or lvl == level]

    @contextmanager
    def _installed(
        self,
        send: Callable[[_http.Request], _http.Response],
        sink: Callable[[types.Chunk], None],
        audio: Callable[[bytes], None],
    ) -> Iterator[None]:
        def write(level: _log.Level, message: str) -> None:
            self.logs.append((level.name.lower(), message))

        def secret(value: str, ttl_ms: int) -> None:
            self.secrets.append(value)

        def abort() -> None:
            errors = self.lines("error")
            raise PluginCrashed(errors[-1] if errors else "the plugin ended its instance")

        fakes: list[tuple[Any, str, Any]] = [
            (_http, "send", send),
            (_sink, "send", sink),
            (_sink, "send_audio", audio),
            (_log, "log", write),
            (_log, "enabled", lambda level: level.value >= self._least),
            (_kv, "get", self.kv.get),
            (_kv, "set", lambda key, value, ttl_ms: self.kv.__setitem__(key, bytes(value))),
            (_kv, "delete", lambda key: self.kv.pop(key, None) and None),
            (_kv, "secret", secret),
            (crash, "_abort", abort),
        ]
        saved = [(module, name, getattr(module, name, None)) for module, name, _ in fakes]
        global _running
        if _running:
            raise RuntimeError("a gateway_plugin.testing run inside another")
        _running = True
        try:
            for module, name, fake in fakes:
                setattr(module, name, fake)
            yield
        finally:
            for module, name, original in saved:
                setattr(module, name, original)
            _running = False


_running = False


class _Body(_http.IncomingBody):
    """The host's `incoming-body` over a test's response."""

    def __init__(self, response: Response) -> None:
        self._response = response

    def read(self) -> bytes | None:
        chunk: bytes | None = self._response._body.read()
        return None if chunk is None else bytes(chunk)

    def __exit__(self, *exc: object) -> bool | None:
        return None


def _origin(url: str) -> tuple[str, str, int] | None:
    """`(scheme, host, port)` of an absolute HTTP(S) URL, lowercased, the port defaulted."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or (443 if scheme == "https" else 80)


def _allowed_origins(entry: str) -> list[tuple[str, str, int]]:
    """The origins one entry of `allowed_hosts` lets a plugin reach, as the gateway reads it: a
    URL's origin; a bare `host[:port]` on either scheme, its port 443 when left out."""
    bare = "://" not in entry
    origin = _origin(f"https://{entry}" if bare else entry)
    if origin is None:
        raise ValueError(f"allowed host {entry!r}: `host`, `host:port` or an http(s) URL")
    return [origin, ("http", origin[1], origin[2])] if bare else [origin]


def _sender(
    sent: list[Sent],
    upstream: Upstream | None,
    permits: Callable[[tuple[str, str, int]], bool],
    unanswered: list[str],
) -> Callable[[_http.Request], _http.Response]:
    """The host's `http.send` for one run: each request recorded in `sent`; one to an origin
    `permits` rejects refused (`forbidden-host`) before `upstream` sees it, as the gateway
    does; without an `upstream`, any other noted in `unanswered` (the test's mistake)."""

    def send(request: _http.Request) -> _http.Response:
        record = Sent(request.method, request.url, list(request.headers), bytes(request.body))
        sent.append(record)
        origin = _origin(request.url)
        if origin is None:
            raise Err(_http.HttpError_InvalidRequest(f"bad URL: {request.url}"))
        if not permits(origin):
            raise Err(_http.HttpError_ForbiddenHost(origin[1]))
        if upstream is None:
            unanswered.append(
                f"the test gave no upstream, but the plugin sent {record.method} {record.url}"
            )
            raise AssertionError(unanswered[-1])
        answer = upstream(record)
        if not isinstance(answer, Response):
            raise Err(answer)
        return _http.Response(answer.status, list(answer.headers), _Body(answer))

    return send


def _no_sink(chunk: types.Chunk) -> None:
    # Only the provider world imports the sink.
    raise Err(None)


def _no_audio(data: bytes) -> None:
    raise Err(None)


@dataclass
class Run(Generic[T, E]):
    """What a run did: the plugin's result or error (a `Call`'s `ProviderError`, a `ToolCall`'s
    `ToolError`), the requests it sent, the chunks the caller was sent (`Call.stream`) or the
    audio (`Call.speak`), and the lines it logged."""

    value: T | None
    error: E | None
    #: The requests the plugin sent, in order (a refused one too).
    sent: list[Sent]
    #: The chunks the caller was sent (`Call.stream`), in order.
    chunks: list[types.Chunk]
    #: The lines logged during the run, `(level, message)`.
    logs: list[tuple[str, str]]
    host: Host
    #: The audio the caller was sent (`Call.speak`), piece by piece as the plugin sent it.
    audio: list[bytes] = field(default_factory=list)

    @property
    def result(self) -> T:
        """What the plugin returned; raises its error when it failed."""
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value

    def streamed_text(self, choice: int = 0) -> str:
        """The streamed text of choice `choice`, as the caller received it."""
        return "".join(
            delta.text for chunk in self.chunks for delta in chunk.deltas if delta.index == choice
        )

    def streamed_audio(self) -> bytes:
        """The audio the caller received (`Call.speak`), whole."""
        return b"".join(self.audio)


def _provider_error(error: types.ProviderError) -> ProviderError:
    if isinstance(error, types.ProviderError_Upstream):
        value = error.value
        return ProviderError.upstream(value.status, value.message, value.retry_after)
    if isinstance(error, types.ProviderError_InvalidRequest):
        return ProviderError.invalid_request(error.value)
    if isinstance(error, types.ProviderError_Timeout):
        return ProviderError.timeout(error.value)
    return ProviderError.failed(error.value)


def _json_text(value: Mapping[str, Any] | str) -> str:
    return value if isinstance(value, str) else _json.dumps(value)


def message(role: str, *texts: str) -> types.Message:
    """A chat message of `role` (`"system"`, `"user"`, `"assistant"`, ...) with one text part
    per text."""
    parts: list[types.Part] = [types.Part_Text(text) for text in texts]
    return types.Message(types.Role[role.upper()], parts, None, None, [], None, False)


class Call:
    """A completion (or embeddings, or speech) request as the gateway passes it, built with
    chained calls, and the run of a plugin on it. The route is `test`, its `base_url`
    `http://upstream.test`, with no key, no settings, no params and no output limit."""

    def __init__(self, model: str, prompt: types.Prompt, inputs: Sequence[str] = ()) -> None:
        self.route = types.Route("test", "http://upstream.test", None, "{}", [])
        self.model = model
        self.prompt = prompt
        self.inputs = list(inputs)
        self.functions: list[types.FunctionDef] = []
        self.function_choice: types.FunctionChoice | None = None
        self.reasoning: types.ReasoningConfig | None = None
        self.output_limit = types.OutputLimit(None, 1)
        self.params_json = "{}"
        #: A speech's voice and audio format (`Call.speech`).
        self.voice = "alloy"
        self.audio_format = "mp3"

    @classmethod
    def text(cls, model: str, prompt: str) -> Call:
        """A `type: text` request for `prompt` to `model`."""
        return cls(model, types.Prompt_Text(prompt))

    @classmethod
    def chat(cls, model: str, messages: Sequence[types.Message]) -> Call:
        """A chat request to `model` (see `message`)."""
        return cls(model, types.Prompt_Chat(list(messages)))

    @classmethod
    def embedding(cls, model: str, inputs: Sequence[str]) -> Call:
        """An embeddings request for `inputs`, for `embed`."""
        return cls(model, types.Prompt_Text(""), inputs)

    @classmethod
    def speech(
        cls,
        model: str,
        input: str,  # noqa: A002 (the WIT's names)
        voice: str = "alloy",
        format: str = "mp3",  # noqa: A002
    ) -> Call:
        """A speech request (`POST /v1/audio/speech`): `input` spoken by `model` in `voice`, as
        `format` (`mp3`, `opus`, `aac`, `flac`, `wav` or `pcm`), for `speak`."""
        call = cls(model, types.Prompt_Text(input))
        call.voice = voice
        call.audio_format = format
        return call

    def base_url(self, base_url: str) -> Call:
        """The route's `base_url`: the only origin the plugin may reach."""
        self.route.base_url = base_url.rstrip("/")
        return self

    def api_key(self, key: str | None) -> Call:
        """The provider key (the route's, or the caller's `Provider-API-Key`)."""
        self.route.api_key = key
        return self

    def settings(self, settings: Mapping[str, Any] | str) -> Call:
        """The route's `settings`, as the config's table gives them (a dict, or JSON text)."""
        self.route.settings = _json_text(settings)
        return self

    def secret(self, name: str, value: str) -> Call:
        """A secret the route's settings name (`NAME_env`): `name` and its value."""
        self.route.secrets.append((name, value))
        return self

    def params(self, params: Mapping[str, Any] | str) -> Call:
        """The caller's other params (`temperature`, `stop`...), a JSON object."""
        self.params_json = _json_text(params)
        return self

    def output(self, max_tokens: int | None, choices: int = 1) -> Call:
        """The output limit the gateway reserved for: `max_tokens` a choice, and `choices`."""
        self.output_limit = types.OutputLimit(max_tokens, choices)
        return self

    @property
    def request(self) -> types.CompletionRequest:
        """The completion request as built."""
        return types.CompletionRequest(
            self.route,
            self.model,
            self.prompt,
            list(self.functions),
            self.function_choice,
            self.reasoning,
            self.output_limit,
            self.params_json,
        )

    @property
    def embedding_request(self) -> types.EmbeddingRequest:
        """The embeddings request as built."""
        return types.EmbeddingRequest(self.route, self.model, list(self.inputs), self.params_json)

    @property
    def speech_request(self) -> types.SpeechRequest:
        """The speech request as built: the text prompt is its `input`."""
        text = self.prompt.value if isinstance(self.prompt, types.Prompt_Text) else ""
        return types.SpeechRequest(
            self.route, self.model, text, self.voice, self.audio_format, self.params_json
        )

    def complete(
        self, world: type[ProviderWorld] | ProviderWorld, upstream: Upstream, host: Host | None = None
    ) -> Run[types.Completion, ProviderError]:
        """Runs the plugin's `complete` export with `upstream` answering its requests."""
        request = self.request
        return self._run(lambda w: w.complete(request), world, upstream, host, None)

    def stream(
        self,
        world: type[ProviderWorld] | ProviderWorld,
        upstream: Upstream,
        host: Host | None = None,
        *,
        caller_leaves_after: int | None = None,
    ) -> Run[types.Completion, ProviderError]:
        """Runs the plugin's `complete-stream` export with `upstream` answering its requests;
        the chunks the caller was sent are `Run.chunks`. With `caller_leaves_after=n` the caller
        disconnects after `n` chunks: the next send fails, as the gateway's sink does."""
        request = self.request
        return self._run(
            lambda w: w.complete_stream(request), world, upstream, host, caller_leaves_after
        )

    #: The `complete-stream` export's own name.
    complete_stream = stream

    def embed(
        self, world: type[ProviderWorld] | ProviderWorld, upstream: Upstream, host: Host | None = None
    ) -> Run[types.Embeddings, ProviderError]:
        """Runs the plugin's `embed` export on `embedding_request`."""
        request = self.embedding_request
        return self._run(lambda w: w.embed(request), world, upstream, host, None)

    def speak(
        self,
        world: type[ProviderWorld] | ProviderWorld,
        upstream: Upstream,
        host: Host | None = None,
        *,
        caller_leaves_after: int | None = None,
    ) -> Run[types.Speech, ProviderError]:
        """Runs the plugin's `speak` export on `speech_request`; the audio the caller was sent
        is `Run.audio` (`Run.streamed_audio()` whole). With `caller_leaves_after=n` the caller
        disconnects after `n` pieces of audio: the next send fails, as the gateway's sink
        does."""
        request = self.speech_request
        return self._run(lambda w: w.speak(request), world, upstream, host, caller_leaves_after)

    def _run(
        self,
        export: Callable[[ProviderWorld], T],
        world: type[ProviderWorld] | ProviderWorld,
        upstream: Upstream,
        host: Host | None,
        caller_leaves_after: int | None,
    ) -> Run[T, ProviderError]:
        host = host if host is not None else Host()
        allowed = _origin(self.route.base_url)
        sent: list[Sent] = []
        chunks: list[types.Chunk] = []
        audio: list[bytes] = []
        first_log = len(host.logs)
        send = _sender(sent, upstream, lambda origin: origin == allowed, [])

        def sink(chunk: types.Chunk) -> None:
            if caller_leaves_after is not None and len(chunks) >= caller_leaves_after:
                raise Err(None)
            chunks.append(chunk)

        def send_audio(data: bytes) -> None:
            if caller_leaves_after is not None and len(audio) >= caller_leaves_after:
                raise Err(None)
            audio.append(bytes(data))

        instance = world() if isinstance(world, type) else world
        value: T | None = None
        error: ProviderError | None = None
        with host._installed(send, sink, send_audio):
            try:
                value = export(instance)
            except Err as e:
                error = _provider_error(e.value)
        return Run(value, error, sent, chunks, host.logs[first_log:], host, audio)


@dataclass
class Checked:
    """What a guard's check said: the WIT verdict, and the lines it logged."""

    verdict: guard_types.RequestVerdict | guard_types.AnswerVerdict
    logs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return isinstance(
            self.verdict, (guard_types.RequestVerdict_Allow, guard_types.AnswerVerdict_Allow)
        )

    @property
    def denied(self) -> str | None:
        """The deny reason, or `None` when the check did not deny."""
        if isinstance(self.verdict, (guard_types.RequestVerdict_Deny, guard_types.AnswerVerdict_Deny)):
            return self.verdict.value
        return None

    @property
    def rewritten(self) -> list[str] | None:
        """The texts of a rewrite (the input's as `guard.texts` lists them, or one per choice),
        or `None` when the check did not rewrite."""
        from .guard import texts

        if isinstance(self.verdict, guard_types.RequestVerdict_Rewrite):
            return texts(self.verdict.value.input)
        if isinstance(self.verdict, guard_types.AnswerVerdict_Rewrite):
            return list(self.verdict.value.texts)
        return None

    @property
    def changes(self) -> dict[str, int]:
        """What a rewrite says it changed, by kind."""
        if isinstance(
            self.verdict, (guard_types.RequestVerdict_Rewrite, guard_types.AnswerVerdict_Rewrite)
        ):
            return {change.kind: change.count for change in self.verdict.value.changes}
        return {}


class Check:
    """A request as the gateway shows it to a guard (guard `test`, route `test`, no settings,
    no params), and a guard's checks of it and of an answer."""

    def __init__(self, model: str, input: guard_types.Input) -> None:  # noqa: A002 (WIT name)
        self.raw = guard_types.CheckedRequest("test", "{}", "test", model, input, [], "{}")

    @classmethod
    def text(cls, model: str, prompt: str) -> Check:
        return cls(model, guard_types.Input_Prompt(types.Prompt_Text(prompt)))

    @classmethod
    def chat(cls, model: str, messages: Sequence[types.Message]) -> Check:
        return cls(model, guard_types.Input_Prompt(types.Prompt_Chat(list(messages))))

    @classmethod
    def embedding(cls, model: str, inputs: Sequence[str]) -> Check:
        return cls(model, guard_types.Input_Embedding(list(inputs)))

    def settings(self, settings: Mapping[str, Any] | str) -> Check:
        """The guard's `settings` from the config."""
        self.raw.settings = _json_text(settings)
        return self

    def params(self, params: Mapping[str, Any] | str) -> Check:
        self.raw.params = _json_text(params)
        return self

    def route(self, route: str) -> Check:
        self.raw.route = route
        return self

    def request(self, world: type[GuardWorld] | GuardWorld, host: Host | None = None) -> Checked:
        """Runs the guard's `check_request` export."""
        return self._check(lambda w: w.check_request(self.raw), world, host)

    def response(
        self,
        world: type[GuardWorld] | GuardWorld,
        answer: types.Completion | Sequence[str],
        host: Host | None = None,
    ) -> Checked:
        """Runs the guard's `check_response` export on `answer`: a completion, or the texts of
        its choices (choice `i` the `i`th text, finished with `stop`)."""
        if not isinstance(answer, types.Completion):
            choices = [
                types.Choice(i, text, [], types.FinishReason_Stop(), None, [], None)
                for i, text in enumerate(answer)
            ]
            answer = types.Completion(self.raw.model, choices, None)
        completion = answer
        return self._check(lambda w: w.check_response(self.raw, completion), world, host)

    def _check(
        self,
        export: Callable[[GuardWorld], guard_types.RequestVerdict | guard_types.AnswerVerdict],
        world: type[GuardWorld] | GuardWorld,
        host: Host | None,
    ) -> Checked:
        host = host if host is not None else Host()
        first_log = len(host.logs)

        def no_http(request: _http.Request) -> _http.Response:
            # The guard world has no HTTP import: a guard cannot send at all.
            raise Err(_http.HttpError_ForbiddenHost(urlsplit(request.url).hostname or request.url))

        instance = world() if isinstance(world, type) else world
        with host._installed(no_http, _no_sink, _no_audio):
            verdict = export(instance)
        return Checked(verdict, host.logs[first_log:])


class ToolError(Exception):
    """A tool plugin's `tool-error`: the call could not be made at all. `kind` is
    `unknown_tool` or `invalid_arguments` (JSON-RPC -32602 to the caller) or `failed` (a
    gateway error); `message` what the plugin said; `raw` the WIT value."""

    def __init__(self, raw: tool_types.ToolError) -> None:
        super().__init__(raw.value)
        self.raw = raw
        self.message: str = raw.value
        if isinstance(raw, tool_types.ToolError_UnknownTool):
            self.kind = "unknown_tool"
        elif isinstance(raw, tool_types.ToolError_InvalidArguments):
            self.kind = "invalid_arguments"
        else:
            self.kind = "failed"

    def __repr__(self) -> str:
        return f"ToolError({self.kind}: {self.message!r})"


class ToolCall:
    """A tool server (`[mcp_servers.ID] plugin = "NAME"`) as the gateway runs a tool plugin
    for it, built with chained calls: the WIT `tool-context` (server `test`, no settings, no
    secrets) and its `allowed_hosts` (none); and the runs of the plugin's `list-tools` and
    `call-tool` exports. A request to a host not allowed is refused (`forbidden-host`) before
    the upstream sees it; a `tool-error` is `Run.error`, a `ToolError`."""

    def __init__(self, server: str = "test") -> None:
        self.context = tool_types.ToolContext(server, "{}", [])
        #: The `allowed_hosts` entries, as given.
        self.hosts: list[str] = []
        self._origins: list[tuple[str, str, int]] = []

    @classmethod
    def server(cls, id: str = "test") -> ToolCall:  # noqa: A002 (the config's word)
        """The server `[mcp_servers.ID]`."""
        return cls(id)

    def settings(self, settings: Mapping[str, Any] | str) -> ToolCall:
        """The server's `settings`, as the config's table gives them (a dict, or JSON text)."""
        self.context.settings = _json_text(settings)
        return self

    def secret(self, name: str, value: str) -> ToolCall:
        """A secret the server's settings name (`NAME_env`): `name` and its value."""
        self.context.secrets.append((name, value))
        return self

    def allow_hosts(self, *hosts: str) -> ToolCall:
        """Entries of the server's `allowed_hosts`, read as the gateway reads them:
        `api.example.com` or `127.0.0.1:8080` on either scheme (port 443 when left out), or a
        URL (its origin only)."""
        for entry in hosts:
            self._origins.extend(_allowed_origins(entry))
            self.hosts.append(entry)
        return self

    def list_tools(
        self, world: type[ToolWorld] | ToolWorld, host: Host | None = None
    ) -> Run[list[tool_types.ToolDef], ToolError]:
        """Runs the plugin's `list-tools` export: `Run.result` is its `ToolDef`s."""
        context = self._context()
        return self._run(lambda w: w.list_tools(context), world, None, host)

    def call_tool(
        self,
        world: type[ToolWorld] | ToolWorld,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        upstream: Upstream | None = None,
        host: Host | None = None,
    ) -> Run[tool_types.ToolResult, ToolError]:
        """Runs the plugin's `call-tool` export for tool `name` with `arguments` (a dict, or
        JSON text; default `{}`) and `upstream` answering its requests: `Run.result` is the
        `ToolResult`. Without `upstream`, a request to an allowed host fails the test."""
        context = self._context()
        text = "{}" if arguments is None else _json_text(arguments)
        return self._run(lambda w: w.call_tool(name, text, context), world, upstream, host)

    def _context(self) -> tool_types.ToolContext:
        raw = self.context
        return tool_types.ToolContext(raw.server, raw.settings, list(raw.secrets))

    def _run(
        self,
        export: Callable[[ToolWorld], T],
        world: type[ToolWorld] | ToolWorld,
        upstream: Upstream | None,
        host: Host | None,
    ) -> Run[T, ToolError]:
        host = host if host is not None else Host()
        origins = list(self._origins)
        sent: list[Sent] = []
        unanswered: list[str] = []
        first_log = len(host.logs)
        send = _sender(sent, upstream, origins.__contains__, unanswered)
        instance = world() if isinstance(world, type) else world
        value: T | None = None
        error: ToolError | None = None
        try:
            with host._installed(send, _no_sink, _no_audio):
                try:
                    value = export(instance)
                except Err as e:
                    error = ToolError(e.value)
        finally:
            if unanswered:
                # Whatever the plugin made of it (a crash, most likely): the test's mistake.
                raise AssertionError(unanswered[0])
        return Run(value, error, sent, [], host.logs[first_log:], host)


def json(
    status: int, value: Any, headers: Iterable[tuple[str, str]] = ()
) -> Response:
    """An answer of `status` whose body is `value` as JSON."""
    body = _json.dumps(value).encode()
    return Response.from_chunks(status, [("content-type", "application/json"), *headers], [body])


def sse(events: Iterable[Any]) -> Response:
    """A 200 Server-Sent Events stream of `data` events, one body chunk each: a string is sent
    as it is (`"[DONE]"`), anything else as its JSON."""
    chunks = [
        f"data: {e if isinstance(e, str) else _json.dumps(e)}\n\n".encode() for e in events
    ]
    return Response.from_chunks(200, [("content-type", "text/event-stream")], chunks)


def ndjson(values: Iterable[Any]) -> Response:
    """A 200 newline-delimited JSON stream of `values`, one line and one body chunk each."""
    chunks = [f"{_json.dumps(v)}\n".encode() for v in values]
    return Response.from_chunks(200, [("content-type", "application/x-ndjson")], chunks)
