"""What providers and guards share: usage, finish reasons, and the JSON objects the gateway
passes as text (a route's or a guard's settings, the caller's params)."""

import json
from collections.abc import Callable
from typing import Any

from wit_world.imports import types

from .errors import ProviderError

__all__ = [
    "usage",
    "openai_usage",
    "finish_reason",
    "finish_reason_name",
    "json_object",
    "role_name",
]


def usage(
    prompt_tokens: int,
    completion_tokens: int,
    total_tokens: int | None = None,
    *,
    cached_prompt_tokens: int | None = None,
    cache_creation_tokens: int | None = None,
    reasoning_tokens: int | None = None,
    image_prompt_tokens: int | None = None,
    audio_prompt_tokens: int | None = None,
) -> types.Usage:
    """Token counts of a call (the gateway prices calls from them); the total defaults to the
    sum. The details are included in the prompt or completion counts, as the gateway wants."""
    if total_tokens is None:
        total_tokens = prompt_tokens + completion_tokens
    return types.Usage(
        _u32(prompt_tokens),
        _u32(completion_tokens),
        _u32(total_tokens),
        _opt_u32(cached_prompt_tokens),
        _opt_u32(cache_creation_tokens),
        _opt_u32(reasoning_tokens),
        _opt_u32(image_prompt_tokens),
        _opt_u32(audio_prompt_tokens),
    )


def _u32(value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return 0
    return min(max(number, 0), 2**32 - 1)


def _opt_u32(value: Any) -> int | None:
    return None if value is None else _u32(value)


def openai_usage(value: Any) -> types.Usage | None:
    """OpenAI's usage object (`prompt_tokens`, `completion_tokens`, `total_tokens` and their
    `*_details`), the shape most OpenAI-compatible servers send; `None` when `value` is not an
    object (a chunk without usage)."""
    if not isinstance(value, dict):
        return None
    prompt = value.get("prompt_tokens") or 0
    completion = value.get("completion_tokens") or 0
    prompt_details = value.get("prompt_tokens_details") or {}
    completion_details = value.get("completion_tokens_details") or {}
    if not isinstance(prompt_details, dict):
        prompt_details = {}
    if not isinstance(completion_details, dict):
        completion_details = {}
    cached = prompt_details.get("cached_tokens")
    if cached is None:
        cached = value.get("prompt_cache_hit_tokens")
    return usage(
        prompt,
        completion,
        value.get("total_tokens"),
        cached_prompt_tokens=cached,
        reasoning_tokens=completion_details.get("reasoning_tokens"),
        audio_prompt_tokens=prompt_details.get("audio_tokens"),
    )


# The cases without a payload (a variant's cases are classes, not a type mypy can name as one).
_FINISH: dict[str, type[Any]] = {
    "stop": types.FinishReason_Stop,
    "length": types.FinishReason_Length,
    "function_call": types.FinishReason_FunctionCall,
    "tool_calls": types.FinishReason_ToolCalls,
    "content_filter": types.FinishReason_ContentFilter,
    "pause": types.FinishReason_Pause,
    "refusal": types.FinishReason_Refusal,
}


def finish_reason(name: str) -> types.FinishReason:
    """The finish reason spelled as OpenAI-style APIs spell it (`stop`, `length`,
    `function_call`, `tool_calls`, `content_filter`); any other spelling is `other`."""
    make = _FINISH.get(name)
    reason: types.FinishReason = make() if make is not None else types.FinishReason_Other()
    return reason


def finish_reason_name(reason: types.FinishReason | None) -> str | None:
    """The name of a finish reason (`stop`, ..., `stop_sequence`, `other`)."""
    if reason is None:
        return None
    if isinstance(reason, types.FinishReason_StopSequence):
        return "stop_sequence"
    for name, kind in _FINISH.items():
        if isinstance(reason, kind):
            return name
    return "other"


def role_name(role: types.Role) -> str:
    """A role as OpenAI-style APIs spell it: `system`, `user`, `assistant`, `function`, `tool`."""
    return role.name.lower()


def json_object(
    text: str, what: str, error: Callable[[str], ProviderError] = ProviderError.failed
) -> dict[str, Any]:
    """`text` (a JSON object as text; empty is `{}`) as a dict; anything else raises
    `error(f"{what} must be a JSON object")`."""
    text = (text or "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as e:
        raise error(f"{what} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise error(f"{what} must be a JSON object")
    return value


def settings_object(text: str, where: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """Settings (a JSON object as text) with `defaults` for the keys they leave out. Given
    defaults, a key not among them, or a value of another type than its default's, raises
    `ProviderError.failed` naming `where` and the key: a misspelt setting is refused rather
    than silently ignored. An int is taken where the default is a float."""
    values = json_object(text, f"{where}: settings")
    if not defaults:
        return values
    for key in values:
        if key not in defaults:
            names = ", ".join(sorted(defaults))
            raise ProviderError.failed(f"{where}: unknown setting `{key}` (known: {names})")
    for key, default in defaults.items():
        value = values.get(key)
        if value is None:
            values[key] = default
        elif default is not None and not _same_kind(value, default):
            kind = _KINDS.get(type(default), f"a {type(default).__name__}")
            raise ProviderError.failed(f"{where}: setting `{key}` must be {kind}")
    return values


_KINDS = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a table",
}


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))
