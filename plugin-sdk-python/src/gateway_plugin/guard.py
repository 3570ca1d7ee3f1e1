"""Guard plugins (the `guard` world of `wit/guard.wit`): check each request before it reaches
the provider plugin, and each answer before it reaches the caller.

Subclass `Guard`, override `check_request` and/or `check_response` (both allow by default) and
return `allow()`, `deny(reason)` or `rewrite(texts, changes)`; end the module with
`WitWorld = guard_world(MyGuard)`. `texts(...)` lists the texts to look at: the prompt's or the
conversation's text parts, or an embeddings request's inputs, in order; `rewrite` takes the same
list back, changed.

A deny reason is shown to the caller and recorded: name the rule that matched, never the text
that matched it (it may be the very secret the guard keeps out). A guard that raises ends its
instance and the gateway refuses the request (it fails closed).
"""

from dataclasses import dataclass, field
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from wit_world.imports import guard_types, types

from . import crash, log
from .common import json_object, settings_object

T = TypeVar("T")

__all__ = [
    "Allow",
    "Deny",
    "Guard",
    "GuardRequest",
    "GuardWorld",
    "Rewrite",
    "allow",
    "deny",
    "guard_world",
    "rewrite",
    "texts",
]


@dataclass
class Allow:
    """Let it through unchanged."""


@dataclass
class Deny:
    """Refuse it, for `reason` (shown to the caller and recorded)."""

    reason: str


@dataclass
class Rewrite:
    """Send (or answer) these texts instead; `changes` counts what changed by kind."""

    texts: list[str]
    changes: dict[str, int] = field(default_factory=dict)


Verdict = Allow | Deny | Rewrite


def allow() -> Allow:
    return Allow()


def deny(reason: str) -> Deny:
    return Deny(reason)


def rewrite(new_texts: Sequence[str], changes: dict[str, int] | None = None) -> Rewrite:
    """The texts of `texts(...)`, in the same order and number, some changed; `changes` counts
    the changes by kind (`{"email": 2}`); it is recorded, so it never holds removed text."""
    return Rewrite(list(new_texts), dict(changes or {}))


class GuardRequest:
    """What a guard is shown of a call (`request.raw` is the WIT record): the guard's id and
    settings, the route, the model, the input and the caller's params, without keys or
    secrets."""

    def __init__(self, raw: guard_types.CheckedRequest) -> None:
        self.raw = raw
        self.guard: str = raw.guard
        self.route: str = raw.route
        self.model: str = raw.model
        self.input: guard_types.Input = raw.input

    def settings(self, **defaults: Any) -> dict[str, Any]:
        """The guard's `settings` from the config, with `defaults` for the keys it leaves out;
        given defaults, other keys and values of another type than their default are refused
        (the guard fails, and the gateway with it refuses the request)."""
        return settings_object(self.raw.settings, f"guard `{self.guard}`", defaults)

    def params(self) -> dict[str, Any]:
        return json_object(self.raw.params, "params")

    def texts(self) -> list[str]:
        return texts(self)


def texts(of: Any) -> list[str]:
    """The texts of a `GuardRequest` (its input's), of an input, or of an answer (one per
    choice), in order."""
    if isinstance(of, GuardRequest):
        of = of.input
    if isinstance(of, types.Completion):
        return [choice.text for choice in of.choices]
    if isinstance(of, guard_types.Input_Embedding):
        return list(of.value)
    if isinstance(of, guard_types.Input_Prompt):
        of = of.value
    if isinstance(of, types.Prompt_Text):
        return [of.value]
    if isinstance(of, types.Prompt_Chat):
        return [
            part.value
            for message in of.value
            for part in message.parts
            if isinstance(part, types.Part_Text)
        ]
    raise TypeError(f"no texts in {type(of).__name__}")


def _with_texts(input_: guard_types.Input, new: list[str]) -> guard_types.Input:
    """`input_` of the same kind with its texts (as `texts` lists them) replaced by `new`."""
    count = len(texts(input_))
    if len(new) != count:
        raise ValueError(f"a rewrite has {len(new)} texts for {count}")
    if isinstance(input_, guard_types.Input_Embedding):
        return guard_types.Input_Embedding(list(new))
    prompt = input_.value
    if isinstance(prompt, types.Prompt_Text):
        return guard_types.Input_Prompt(types.Prompt_Text(new[0]))
    replacements = iter(new)
    messages = []
    for message in prompt.value:
        parts = [
            types.Part_Text(next(replacements)) if isinstance(part, types.Part_Text) else part
            for part in message.parts
        ]
        messages.append(
            types.Message(
                message.role,
                parts,
                message.name,
                message.function_call,
                message.tool_calls,
                message.tool_call_id,
                message.is_error,
            )
        )
    return guard_types.Input_Prompt(types.Prompt_Chat(messages))


def _changes(changes: dict[str, int]) -> list[guard_types.Change]:
    return [guard_types.Change(kind, int(count)) for kind, count in changes.items()]


class Guard:
    """A guard. Set `NAME` and `VERSION`; override what it checks. Each request has a
    fresh instance; its answer's check usually runs in the one that checked the request, but
    may run in another, so keep nothing between them."""

    NAME = "python-guard"
    VERSION = "0.1.0"

    def info(self) -> types.PluginInfo:
        return types.PluginInfo(self.NAME, self.VERSION, [])

    def check_request(self, request: GuardRequest) -> Verdict:
        """Before the provider: default allow."""
        return Allow()

    def check_response(self, request: GuardRequest, answer: types.Completion) -> Verdict:
        """The whole answer (for a stream, once it has ended): default allow."""
        return Allow()


def _checked(action: Callable[[], T]) -> T:
    """Runs an export; an exception is a bug, logged once and ending the instance
    (`crash.end`): the guard failed, and the gateway refuses the request unchecked."""
    try:
        return action()
    except BaseException as e:  # noqa: BLE001 (every exception ends the check)
        crash.end(e, "guard")


def _allowed(verdict: Any, check: str) -> None:
    """Checks that `verdict`, neither a deny nor a rewrite, is an allow: anything else (a
    forgotten `return` gives `None`) is a bug, and a guard fails closed rather than let the
    request through unchecked."""
    if not isinstance(verdict, Allow):
        raise TypeError(
            f"{check} returned {type(verdict).__name__}, not allow(), deny(reason) or rewrite(...)"
        )


class GuardWorld(Protocol):
    """The `guard` world's exports, as the gateway calls them."""

    def info(self) -> types.PluginInfo: ...

    def check_request(
        self, request: guard_types.CheckedRequest
    ) -> guard_types.RequestVerdict: ...

    def check_response(
        self, request: guard_types.CheckedRequest, answer: types.Completion
    ) -> guard_types.AnswerVerdict: ...


def guard_world(guard: Callable[[], Guard]) -> type[GuardWorld]:
    """The `WitWorld` class componentize-py exports for `guard` (a `Guard` subclass):

    WitWorld = guard_world(MyGuard)
    """

    def request_verdict(raw: guard_types.CheckedRequest) -> guard_types.RequestVerdict:
        request = GuardRequest(raw)
        verdict = guard().check_request(request)
        if isinstance(verdict, Deny):
            return guard_types.RequestVerdict_Deny(verdict.reason)
        if isinstance(verdict, Rewrite):
            rewritten = guard_types.RequestRewrite(
                _with_texts(request.input, verdict.texts), _changes(verdict.changes)
            )
            return guard_types.RequestVerdict_Rewrite(rewritten)
        _allowed(verdict, "check_request")
        return guard_types.RequestVerdict_Allow()

    def answer_verdict(
        raw: guard_types.CheckedRequest, answer: types.Completion
    ) -> guard_types.AnswerVerdict:
        verdict = guard().check_response(GuardRequest(raw), answer)
        if isinstance(verdict, Deny):
            return guard_types.AnswerVerdict_Deny(verdict.reason)
        if isinstance(verdict, Rewrite):
            if len(verdict.texts) != len(answer.choices):
                raise ValueError(
                    f"an answer rewrite has {len(verdict.texts)} texts for "
                    f"{len(answer.choices)} choices"
                )
            rewritten = guard_types.AnswerRewrite(list(verdict.texts), _changes(verdict.changes))
            return guard_types.AnswerVerdict_Rewrite(rewritten)
        _allowed(verdict, "check_response")
        return guard_types.AnswerVerdict_Allow()

    class WitWorld:
        def info(self) -> types.PluginInfo:
            return _checked(lambda: guard().info())

        def check_request(self, request: guard_types.CheckedRequest) -> guard_types.RequestVerdict:
            return _checked(lambda: request_verdict(request))

        def check_response(
            self, request: guard_types.CheckedRequest, answer: types.Completion
        ) -> guard_types.AnswerVerdict:
            return _checked(lambda: answer_verdict(request, answer))

    WitWorld.__qualname__ = WitWorld.__name__ = "WitWorld"
    return WitWorld

