"""Google's `google-genai` SDK, unchanged, against the gateway's Gemini-format endpoints
(`/v1/models/{model}:generateContent` and the rest; `/v1beta/` too), on routes of the openai,
anthropic and gemini plugins replaying recorded traffic."""

import json
import urllib.error
import urllib.request

import pytest
from google import genai
from google.genai import errors, types

from conftest import TIMEOUT_SECONDS
from scenario import (
    PROVIDERS,
    TOOL_CASES,
    gemini_functions,
    gemini_prompt,
    gemini_system,
    record,
)

MAX_TOKENS = 1000

# OpenAI's finish reasons as Gemini's: a turn that called functions ends as a plain stop.
GEMINI_FINISH = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS"}


def client(scenario, api_version=None, key=None):
    options = types.HttpOptions(base_url=scenario["url"], timeout=TIMEOUT_SECONDS * 1000)
    if api_version:
        options.api_version = api_version
    return genai.Client(api_key=key or scenario["key"], http_options=options)


@pytest.fixture(scope="module")
def gemini(scenario):
    return client(scenario)


def config(case):
    """The case's system instruction and tools, as `GenerateContentConfig`."""
    declarations = [types.FunctionDeclaration(**tool) for tool in gemini_functions(case)]
    tools = [types.Tool(function_declarations=declarations)] if declarations else None
    return types.GenerateContentConfig(
        system_instruction=gemini_system(case), max_output_tokens=MAX_TOKENS, tools=tools
    )


def prompt(case):
    return gemini_prompt(case)


def assert_usage(metadata, expected):
    assert metadata.prompt_token_count == expected["prompt"]
    assert metadata.total_token_count == expected["total"]
    thoughts = metadata.thoughts_token_count or 0
    assert (metadata.candidates_token_count or 0) + thoughts == expected["completion"]


def assert_calls(calls, expected):
    """The function calls are the recorded ones: names, ids where the provider has them (made
    up, but present and distinct, where it has none), and arguments."""
    calls = calls or []
    assert [call.name for call in calls] == [want["name"] for want in expected]
    for call, want in zip(calls, expected):
        assert call.id == want["id"] if want["id"] is not None else call.id
        assert call.args == json.loads(want["arguments"])
    assert len({call.id for call in calls}) == len(calls), "call ids repeat"


def texts(response):
    """The answer's text parts, thoughts left out (as `response.text` reads them, without its
    warning about function calls)."""
    parts = response.candidates[0].content.parts or []
    return "".join(part.text for part in parts if part.text and not part.thought)


# ------------------------------------------------------------------------------ generate


@pytest.mark.parametrize("provider", PROVIDERS)
def test_generate_content(gemini, scenario, provider):
    expected = scenario["cases"][provider]["simple"]
    response = gemini.models.generate_content(
        model=expected["model"], contents=prompt("simple"), config=config("simple")
    )
    assert response.text == expected["text"]
    candidate = response.candidates[0]
    assert candidate.finish_reason == GEMINI_FINISH[expected["finish"]]
    assert candidate.content.role == "model"
    assert_usage(response.usage_metadata, expected["usage"])
    assert response.response_id
    assert response.model_version


def test_generate_content_on_v1beta(scenario):
    """The other version of the API, as older SDKs and Gemini's REST examples call it."""
    expected = scenario["cases"]["anthropic"]["simple"]
    # Held in a name: a Client nobody holds closes its connections.
    v1beta = client(scenario, api_version="v1beta")
    response = v1beta.models.generate_content(
        model=expected["model"], contents=prompt("simple"), config=config("simple")
    )
    assert response.text == expected["text"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_generate_content_stream(gemini, scenario, provider):
    expected = scenario["cases"][provider]["simple_streaming"]
    chunks = list(
        gemini.models.generate_content_stream(
            model=expected["model"],
            contents=prompt("simple_streaming"),
            config=config("simple_streaming"),
        )
    )
    assert len(chunks) > 1
    assert "".join(texts(chunk) for chunk in chunks) == expected["text"]
    last = chunks[-1]
    assert last.candidates[0].finish_reason == GEMINI_FINISH[expected["finish"]]
    assert_usage(last.usage_metadata, expected["usage"])


@pytest.mark.parametrize("case", TOOL_CASES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_function_calls(gemini, scenario, provider, case):
    expected = scenario["cases"][provider][case]
    response = gemini.models.generate_content(
        model=expected["model"], contents=prompt(case), config=config(case)
    )
    assert_calls(response.function_calls, expected["calls"])
    assert texts(response) == expected["text"]
    assert response.candidates[0].finish_reason == "STOP"
    assert_usage(response.usage_metadata, expected["usage"])


@pytest.mark.parametrize("case", TOOL_CASES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_function_calls_streamed(gemini, scenario, provider, case):
    case = f"{case}_streaming"
    expected = scenario["cases"][provider][case]
    chunks = list(
        gemini.models.generate_content_stream(
            model=expected["model"], contents=prompt(case), config=config(case)
        )
    )
    calls = [call for chunk in chunks for call in (chunk.function_calls or [])]
    assert_calls(calls, expected["calls"])
    assert "".join(texts(chunk) for chunk in chunks) == expected["text"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_function_response_round_trip(gemini, scenario, provider):
    """The model's functionCall and the caller's functionResponse go back to the provider (the
    runner checks they arrived), which answers with text."""
    expected = scenario["cases"][provider]["tool_result"]
    call = expected["feed"]
    said = [types.Part(text=expected["feed_text"])] if expected["feed_text"] else []
    contents = [
        types.Content(role="user", parts=[types.Part(text=prompt("tool"))]),
        types.Content(
            role="model",
            parts=said
            + [
                types.Part(
                    function_call=types.FunctionCall(
                        id=call["id"], name=call["name"], args=json.loads(call["arguments"])
                    )
                )
            ],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call["id"],
                        name=call["name"],
                        response={"output": scenario["tool_output"]},
                    )
                )
            ],
        ),
    ]
    response = gemini.models.generate_content(
        model=expected["model"], contents=contents, config=config("tool")
    )
    assert response.text == expected["text"]
    assert_usage(response.usage_metadata, expected["usage"])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_image_and_a_pdf(gemini, scenario, provider):
    """Inline image and document parts reach other providers in their own formats (the runner
    checks what each upstream got)."""
    media = scenario["media"][provider]
    png = b"\x89PNG\r\n\x1a\n" + bytes(64)
    pdf = b"%PDF-1.4\n" + bytes(64) + b"\n%%EOF"
    response = gemini.models.generate_content(
        model=media["model"],
        contents=[
            "Compare these.",
            types.Part.from_bytes(data=png, mime_type="image/png"),
            types.Part.from_bytes(data=pdf, mime_type="application/pdf"),
        ],
    )
    assert response.text == media["text"]


def test_headers_and_record(gemini, scenario):
    expected = scenario["cases"]["openai"]["simple"]
    response = gemini.models.generate_content(
        model=expected["model"], contents=prompt("simple"), config=config("simple")
    )
    headers = response.sdk_http_response.headers
    invocation_id = headers["x-invocation-id"]
    assert float(headers["x-gateway-cost-usd"]) == pytest.approx(expected["cost_usd"], rel=1e-6)
    assert response.response_id == invocation_id
    stored = record(scenario, invocation_id)
    assert stored["status"] == "success"
    assert stored["type"] == "chat"


def test_alias(gemini, scenario):
    expected = scenario["aliases"]["claude"]
    response = gemini.models.generate_content(
        model="claude", contents=prompt("simple"), config=config("simple")
    )
    assert response.text == expected["text"]


# ------------------------------------------------------------------------------ counts, embeddings


@pytest.mark.parametrize("provider", PROVIDERS)
def test_count_tokens(gemini, scenario, provider):
    """`models.count_tokens`: Anthropic's and Gemini's own counts on their routes; the gateway's,
    with the model's tokenizer, on an OpenAI route."""
    expected = scenario["count_tokens"][provider]
    count = gemini.models.count_tokens(model=expected["model"], contents="Hello!")
    assert count.total_tokens == expected["tokens"]


def test_embed_content(gemini, scenario):
    """`models.embed_content` (which calls batchEmbedContents) on an OpenAI route."""
    expected = scenario["embeddings"]
    result = gemini.models.embed_content(model=expected["model"], contents=expected["inputs"])
    vectors = [embedding.values for embedding in result.embeddings]
    assert len(vectors) == len(expected["vectors"])
    for got, want in zip(vectors, expected["vectors"]):
        assert got == pytest.approx(want, rel=1e-6)


def test_models_list_in_gemini_shape(gemini, scenario):
    names = [model.name for model in gemini.models.list()]
    missing = {f"models/{name}" for name in scenario["listed"]} - set(names)
    assert not missing, f"not listed: {sorted(missing)}; listed: {names}"
    model = gemini.models.get(model="fast")
    assert model.name == "models/fast"
    assert "generateContent" in model.supported_actions


# ------------------------------------------------------------------------------ errors


def test_bad_key_is_unauthenticated(scenario):
    model = scenario["cases"]["gemini"]["simple"]["model"]
    stranger = client(scenario, key="not-a-gateway-key")
    with pytest.raises(errors.ClientError) as raised:
        stranger.models.generate_content(model=model, contents="hi")
    assert raised.value.code == 401
    assert raised.value.status == "UNAUTHENTICATED"


@pytest.mark.parametrize("stream", [False, True])
def test_unknown_model_is_not_found(gemini, stream):
    call = gemini.models.generate_content_stream if stream else gemini.models.generate_content
    with pytest.raises(errors.ClientError) as raised:
        result = call(model="no-such-route/gemini-2.5-flash", contents="hi")
        list(result) if stream else None
    assert raised.value.code == 404
    assert raised.value.status == "NOT_FOUND"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_upstream_429_is_resource_exhausted(gemini, scenario, provider):
    with pytest.raises(errors.ClientError) as raised:
        gemini.models.generate_content(model=scenario["limited"][provider], contents="hi")
    assert raised.value.code == 429
    assert raised.value.status == "RESOURCE_EXHAUSTED"
    assert raised.value.response.headers.get("retry-after") == scenario["retry_after"]


def test_upstream_400_is_invalid_argument(gemini, scenario):
    with pytest.raises(errors.ClientError) as raised:
        gemini.models.generate_content(model=scenario["refused"]["model"], contents="hi")
    assert raised.value.code == 400
    assert raised.value.status == "INVALID_ARGUMENT"
    assert scenario["refused"]["message"] in raised.value.message


# ------------------------------------------------------------------------------ plain HTTP


def post(scenario, path, body, headers=None):
    """POSTs `body` (JSON) to `path`; returns (status, headers, parsed body)."""
    request = urllib.request.Request(
        f"{scenario['url']}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def test_the_key_in_the_query_and_embed_content(scenario):
    """Google's REST examples put the key in `?key=`; `embedContent` embeds one content."""
    expected = scenario["embeddings"]
    status, _, body = post(
        scenario,
        f"/v1beta/models/{expected['model']}:embedContent?key={scenario['key']}",
        {"content": {"parts": [{"text": expected["inputs"][0]}]}},
    )
    assert status == 200, body
    values = json.loads(body)["embedding"]["values"]
    assert values == pytest.approx(expected["vectors"][0], rel=1e-6)


def test_a_stream_without_sse_is_refused_in_google_shape(scenario):
    model = scenario["cases"]["openai"]["simple"]["model"]
    status, headers, body = post(
        scenario,
        f"/v1beta/models/{model}:streamGenerateContent",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        {"x-goog-api-key": scenario["key"]},
    )
    assert status == 400
    error = json.loads(body)["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert "alt=sse" in error["message"]
    assert error["details"][0]["requestId"] == headers["x-invocation-id"]


def test_google_tools_are_refused(gemini, scenario):
    model = scenario["cases"]["openai"]["simple"]["model"]
    search = types.Tool(google_search=types.GoogleSearch())
    with pytest.raises(errors.ClientError) as raised:
        gemini.models.generate_content(
            model=model, contents="hi", config=types.GenerateContentConfig(tools=[search])
        )
    assert raised.value.code == 400
    assert "googleSearch" in raised.value.message

