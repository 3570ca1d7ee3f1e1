"""What the runner (tests/e2e/surfaces/clients.rs) tells the suite, and the requests the tests send.

The runner starts the gateway and its fake upstreams, then passes `GATEWAY_CLIENTS_SCENARIO`, a
JSON object:

- `url`, `key`: the gateway and a project key;
- `cases[PROVIDER][CASE]`: for each provider family (`openai`, `anthropic`, `gemini`) and
  recorded case (`simple`, `tool`, `multi_tool`, each also `_streaming`), the `model` that
  reaches the route replaying it (`ROUTE/MODEL`) and what the recording answers: `text`,
  `finish` (OpenAI's name), `calls` (`id` or null, `name`, `arguments` as JSON text), `usage`
  (`prompt`, `completion`, `total`, `reasoning` or null), and `cost_usd` where the route has a
  price; case `tool_result` is the `tool` case's second turn, with the call to send back
  (`feed`: `id`, `name`, `arguments`) and the text that came with it (`feed_text`);
- `tool_output`: the tool's result to send back;
- `limited[PROVIDER]`: a model whose upstream always answers 429 with `retry_after` seconds;
- `refused`: a `model` whose upstream always refuses the request with 400 and `message`;
- `media[PROVIDER]`: a `model` answering the simple recorded `text` to requests with images,
  audio and documents (the runner checks what each upstream received);
- `thinking`: a `model` whose Anthropic upstream streams `thinking` with its `signature`, a
  redacted block and `text`, stopping at the stop sequence `END`;
- `aliases[NAME]`: the case an alias from `[models.NAME]` stands for;
- `listed`: ids `GET /v1/models` must list;
- `embeddings`, `legacy`: a route whose upstream computes embeddings and legacy completions,
  with the inputs and the answers it computes;
- `count_tokens[PROVIDER]`: a `model` and the `tokens` its count of one user message, "Hello!",
  answers (Anthropic's and Gemini's fakes count; the gateway counts for OpenAI's models);
- `rerank`: a `query`, its `documents`, their `order` (indexes, the most relevant first) and
  `scores` as the fake rerankers compute them; the `model` of a Jina-shaped reranker (`jina`,
  which counts `tokens`, priced at `cost_usd`) and of a Cohere-shaped one (`cohere`, which
  bills search units);
- `images`: a `prompt`, the `pngs` (base64, one an index) the fake OpenAI draws of it and the
  `revised_prompt` its DALL-E 3 answers, the models of that fake's DALL-E 3, DALL-E 2 and GPT
  Image (`dall_e_3`, `dall_e_2`, `gpt_image`), and the output tokens GPT Image bills an image
  (`image_tokens`);
- `audio`: the models of that fake's Whisper and GPT-4o transcribe (`whisper`, `gpt`), the
  `file_name` and length in `seconds` of the WAV the tests make, what the fake hears in it
  (`text`, and `translated` into English), and the seconds Whisper bills (`billed_seconds`).
"""

import json
import os
import time
import urllib.error
import urllib.request

SCENARIO_VAR = "GATEWAY_CLIENTS_SCENARIO"

PROVIDERS = ("openai", "anthropic", "gemini")
TOOL_CASES = ("tool", "multi_tool")

# OpenAI's finish reasons as Anthropic's stop reasons.
ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}

_SYSTEM = "You are a helpful assistant"

# The conversations the recordings answered: (system, user message, tools offered).
_PROMPTS = {
    "simple": (_SYSTEM, "Say hi in Portuguese", ()),
    "tool": (_SYSTEM, "What's the weather in Florence,Italy?", ("weather",)),
    "multi_tool": (
        _SYSTEM + ". CRITICAL: Always use both add and multiply at the same time ALWAYS.",
        "Add and multiply the number 2 and 3",
        ("add", "multiply"),
    ),
}


def _number(description):
    return {"type": "integer", "description": description}


_FUNCTIONS = {
    "weather": (
        "Get weather information for a location",
        {"location": {"type": "string", "description": "the city"}},
    ),
    "add": ("Add two numbers", {"a": _number("first number"), "b": _number("second number")}),
    "multiply": (
        "Multiply two numbers",
        {"a": _number("first number"), "b": _number("second number")},
    ),
}


def load():
    """The scenario from the environment (checked by conftest before any test runs)."""
    return json.loads(os.environ[SCENARIO_VAR])


def _schema(name):
    _, properties = _FUNCTIONS[name]
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(properties),
        "additionalProperties": False,
    }


def _base(case):
    """`tool_streaming` -> `tool`: a streamed case sends the same conversation."""
    return case.removesuffix("_streaming")


def openai_messages(case):
    system, user, _ = _PROMPTS[_base(case)]
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def openai_tools(case, strict=False):
    """The case's tools in OpenAI's shape; `strict` ones are what the SDK's stream helper
    accepts (it parses their arguments)."""
    _, _, names = _PROMPTS[_base(case)]
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": _FUNCTIONS[name][0],
                "parameters": _schema(name),
                "strict": strict,
            },
        }
        for name in names
    ]


def responses_instructions(case):
    return _PROMPTS[_base(case)][0]


def responses_input(case):
    """The case's user message as Responses API input items."""
    return [{"role": "user", "content": [{"type": "input_text", "text": _PROMPTS[_base(case)][1]}]}]


def responses_tools(case):
    """The case's tools in the Responses API's flat shape."""
    _, _, names = _PROMPTS[_base(case)]
    return [
        {
            "type": "function",
            "name": name,
            "description": _FUNCTIONS[name][0],
            "parameters": _schema(name),
            "strict": False,
        }
        for name in names
    ]


def anthropic_system(case):
    return _PROMPTS[_base(case)][0]


def anthropic_messages(case):
    return [{"role": "user", "content": _PROMPTS[_base(case)][1]}]


def anthropic_tools(case):
    _, _, names = _PROMPTS[_base(case)]
    return [
        {"name": name, "description": _FUNCTIONS[name][0], "input_schema": _schema(name)}
        for name in names
    ]


def gemini_system(case):
    return _PROMPTS[_base(case)][0]


def gemini_prompt(case):
    return _PROMPTS[_base(case)][1]


def gemini_functions(case):
    """The case's tools as the keyword arguments of google-genai's `FunctionDeclaration`, their
    parameters as JSON Schema."""
    _, _, names = _PROMPTS[_base(case)]
    return [
        {"name": name, "description": _FUNCTIONS[name][0], "parameters_json_schema": _schema(name)}
        for name in names
    ]


def record(scenario, invocation_id, timeout=30.0):
    """`GET /invocations/{id}` with the project's key. Records are written in batches off the
    request path, so a 404 right after the answer is retried until `timeout`."""
    request = urllib.request.Request(
        f"{scenario['url']}/invocations/{invocation_id}",
        headers={"Authorization": f"Bearer {scenario['key']}"},
    )
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            if error.code != 404 or time.monotonic() > deadline:
                raise AssertionError(
                    f"GET /invocations/{invocation_id}: {error.code} {error.read()!r}"
                ) from error
        time.sleep(0.1)
