"""The official `openai` SDK, unchanged, against the gateway's OpenAI-format endpoints
(`/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`, `/v1/models`), on routes of the
openai, anthropic and gemini plugins replaying recorded traffic."""

import base64
import json
import struct

import openai
import pytest

from scenario import (
    PROVIDERS,
    TOOL_CASES,
    openai_messages,
    openai_tools,
    record,
    responses_input,
    responses_instructions,
    responses_tools,
)

STREAM_OPTIONS = {"include_usage": True}


def chat(client, model, case, **params):
    return client.chat.completions.create(
        model=model, messages=openai_messages(case), max_tokens=1000, **params
    )


def assert_usage(usage, expected):
    assert usage is not None, "no usage"
    got = (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)
    assert got == (expected["prompt"], expected["completion"], expected["total"])
    if expected["reasoning"] is not None:
        assert usage.completion_tokens_details is not None, usage
        assert usage.completion_tokens_details.reasoning_tokens == expected["reasoning"]


def assert_calls(calls, expected, exact):
    """`calls` are the recorded ones: names, ids (made up, but present and distinct, where the
    provider has none) and arguments (the same JSON; the same text when `exact`)."""
    calls = calls or []
    assert [call.function.name for call in calls] == [want["name"] for want in expected]
    for call, want in zip(calls, expected):
        assert call.type == "function"
        if want["id"] is not None:
            assert call.id == want["id"]
        else:
            assert call.id
        assert json.loads(call.function.arguments) == json.loads(want["arguments"])
        if exact:
            assert call.function.arguments == want["arguments"]
    assert len({call.id for call in calls}) == len(calls), "tool call ids repeat"


def content_of(message):
    """The message's text; a message of tool calls alone may say `null` or `""`."""
    return message.content or ""


# ------------------------------------------------------------------------------ chat


@pytest.mark.parametrize("provider", PROVIDERS)
def test_chat_text(openai_client, scenario, provider):
    expected = scenario["cases"][provider]["simple"]
    completion = chat(openai_client, expected["model"], "simple")
    assert completion.object == "chat.completion"
    assert completion.id
    assert completion.created > 0
    assert completion.model
    assert len(completion.choices) == 1
    choice = completion.choices[0]
    assert choice.index == 0
    assert choice.message.role == "assistant"
    assert choice.message.content == expected["text"]
    assert not choice.message.tool_calls
    assert choice.finish_reason == expected["finish"]
    assert_usage(completion.usage, expected["usage"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_chat_stream_with_usage(openai_client, scenario, provider):
    expected = scenario["cases"][provider]["simple_streaming"]
    stream = chat(
        openai_client,
        expected["model"],
        "simple_streaming",
        stream=True,
        stream_options=STREAM_OPTIONS,
    )
    chunks = list(stream)
    assert chunks, "no chunk"
    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    assert len({chunk.id for chunk in chunks}) == 1, "chunks of one completion share its id"
    *content_chunks, usage_chunk = chunks
    # The usage comes last, alone, with no choices.
    assert usage_chunk.choices == []
    assert_usage(usage_chunk.usage, expected["usage"])
    assert all(chunk.usage is None for chunk in content_chunks)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in content_chunks)
    assert text == expected["text"]
    finishes = [c.choices[0].finish_reason for c in content_chunks if c.choices[0].finish_reason]
    assert finishes == [expected["finish"]]
    assert content_chunks[-1].choices[0].finish_reason == expected["finish"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_chat_stream_without_usage(openai_client, scenario, provider):
    expected = scenario["cases"][provider]["simple_streaming"]
    chunks = list(chat(openai_client, expected["model"], "simple_streaming", stream=True))
    # Usage is sent only when asked for.
    assert all(chunk.usage is None and chunk.choices for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == expected["text"]
    assert chunks[-1].choices[0].finish_reason == expected["finish"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_chat_stream_helper_text(openai_client, scenario, provider):
    expected = scenario["cases"][provider]["simple_streaming"]
    with openai_client.chat.completions.stream(
        model=expected["model"],
        messages=openai_messages("simple_streaming"),
        stream_options=STREAM_OPTIONS,
    ) as stream:
        deltas = [event.delta for event in stream if event.type == "content.delta"]
        completion = stream.get_final_completion()
    assert "".join(deltas) == expected["text"]
    message = completion.choices[0].message
    assert message.role == "assistant"
    assert message.content == expected["text"]
    assert completion.choices[0].finish_reason == expected["finish"]
    assert_usage(completion.usage, expected["usage"])


# ------------------------------------------------------------------------------ tools


@pytest.mark.parametrize("case", TOOL_CASES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_calls(openai_client, scenario, provider, case):
    expected = scenario["cases"][provider][case]
    completion = chat(
        openai_client, expected["model"], case, tools=openai_tools(case), tool_choice="auto"
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.role == "assistant"
    assert content_of(choice.message) == expected["text"]
    assert_calls(choice.message.tool_calls, expected["calls"], exact=provider == "openai")
    assert_usage(completion.usage, expected["usage"])


@pytest.mark.parametrize("case", TOOL_CASES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_calls_streamed(openai_client, scenario, provider, case):
    """The SDK's stream helper reassembles each call's arguments from the deltas (and parses
    them: the tools are strict)."""
    case = f"{case}_streaming"
    expected = scenario["cases"][provider][case]
    with openai_client.chat.completions.stream(
        model=expected["model"],
        messages=openai_messages(case),
        tools=openai_tools(case, strict=True),
        stream_options=STREAM_OPTIONS,
    ) as stream:
        done = [e for e in stream if e.type == "tool_calls.function.arguments.done"]
        completion = stream.get_final_completion()
    assert [(e.index, e.name) for e in done] == [
        (index, want["name"]) for index, want in enumerate(expected["calls"])
    ]
    for event, want in zip(done, expected["calls"]):
        assert event.parsed_arguments == json.loads(want["arguments"])
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.role == "assistant"
    assert content_of(choice.message) == expected["text"]
    assert_calls(choice.message.tool_calls, expected["calls"], exact=provider == "openai")
    for call in choice.message.tool_calls:
        assert call.function.parsed_arguments == json.loads(call.function.arguments)
    assert_usage(completion.usage, expected["usage"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_result_round_trip(openai_client, scenario, provider):
    """The assistant's call and the `tool` message with its result go back to the provider
    (the runner checks they arrived), which answers with text."""
    expected = scenario["cases"][provider]["tool_result"]
    call = expected["feed"]
    messages = openai_messages("tool") + [
        {
            "role": "assistant",
            "content": expected["feed_text"] or None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call["id"], "content": scenario["tool_output"]},
    ]
    completion = openai_client.chat.completions.create(
        model=expected["model"], messages=messages, tools=openai_tools("tool"), max_tokens=1000
    )
    choice = completion.choices[0]
    assert choice.message.content == expected["text"]
    assert not choice.message.tool_calls
    assert choice.finish_reason == expected["finish"]
    assert_usage(completion.usage, expected["usage"])


# ------------------------------------------------------------------------------ legacy, embeddings, models


def test_legacy_completion(openai_client, scenario):
    legacy = scenario["legacy"]
    completion = openai_client.completions.create(
        model=legacy["model"], prompt=legacy["prompt"], max_tokens=50
    )
    assert completion.object == "text_completion"
    assert completion.id
    assert completion.choices[0].text == legacy["text"]
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    assert completion.usage.completion_tokens > 0


def test_legacy_completion_streamed(openai_client, scenario):
    legacy = scenario["legacy"]
    chunks = list(
        openai_client.completions.create(
            model=legacy["model"], prompt=legacy["prompt"], max_tokens=50, stream=True
        )
    )
    text = "".join(choice.text for chunk in chunks for choice in chunk.choices)
    assert text == legacy["text"]
    finishes = [c.finish_reason for chunk in chunks for c in chunk.choices if c.finish_reason]
    assert finishes == ["stop"]


def test_legacy_completion_from_a_chat_route(openai_client, scenario):
    """A text prompt to a route that only has chat completions is answered from the chat."""
    expected = scenario["cases"]["openai"]["simple"]
    completion = openai_client.completions.create(
        model=expected["model"], prompt="Say hi in Portuguese", max_tokens=50
    )
    assert completion.choices[0].text == expected["text"]
    assert completion.choices[0].finish_reason == expected["finish"]
    assert_usage(completion.usage, expected["usage"])


def test_embeddings(openai_client, scenario):
    """The SDK asks for base64 unless told otherwise, and decodes it to floats."""
    embeddings = scenario["embeddings"]
    result = openai_client.embeddings.create(
        model=embeddings["model"], input=embeddings["inputs"]
    )
    assert result.object == "list"
    assert [item.index for item in result.data] == list(range(len(embeddings["inputs"])))
    assert [item.embedding for item in result.data] == embeddings["vectors"]
    assert all(item.object == "embedding" for item in result.data)
    assert result.usage.prompt_tokens == embeddings["prompt_tokens"]
    assert result.model


def test_embeddings_are_base64_when_asked(openai_client, scenario):
    """The wire answer holds base64 of little-endian float32s, not a list the SDK would also
    accept."""
    embeddings = scenario["embeddings"]
    raw = openai_client.embeddings.with_raw_response.create(
        model=embeddings["model"], input=embeddings["inputs"], encoding_format="base64"
    )
    data = raw.http_response.json()["data"]
    for item, vector in zip(sorted(data, key=lambda d: d["index"]), embeddings["vectors"]):
        assert isinstance(item["embedding"], str), item
        decoded = base64.b64decode(item["embedding"])
        assert list(struct.unpack(f"<{len(decoded) // 4}f", decoded)) == vector


def test_embeddings_as_floats(openai_client, scenario):
    embeddings = scenario["embeddings"]
    raw = openai_client.embeddings.with_raw_response.create(
        model=embeddings["model"], input=embeddings["inputs"], encoding_format="float"
    )
    data = sorted(raw.http_response.json()["data"], key=lambda d: d["index"])
    assert [item["embedding"] for item in data] == embeddings["vectors"]
    assert [item.embedding for item in raw.parse().data] == embeddings["vectors"]


def test_models_list(openai_client, scenario):
    models = list(openai_client.models.list())
    ids = [model.id for model in models]
    missing = set(scenario["listed"]) - set(ids)
    assert not missing, f"not listed: {sorted(missing)}; listed: {ids}"
    assert len(ids) == len(set(ids)), f"listed twice: {ids}"
    assert all(model.object == "model" for model in models)
    assert all(isinstance(model.owned_by, str) and model.owned_by for model in models)


@pytest.mark.parametrize("model", ["fast", "openai-simple/gpt-4o-mini"])
def test_models_retrieve(openai_client, model):
    """The SDK percent-encodes the `/` of `ROUTE/MODEL` in the path."""
    retrieved = openai_client.models.retrieve(model)
    assert retrieved.id == model
    assert retrieved.object == "model"


def test_models_retrieve_unknown(openai_client):
    with pytest.raises(openai.NotFoundError):
        openai_client.models.retrieve("no-such-route/gpt-4o-mini")


@pytest.mark.parametrize("alias", ["fast", "claude"])
def test_alias(openai_client, scenario, alias):
    expected = scenario["aliases"][alias]
    completion = chat(openai_client, alias, "simple")
    assert completion.choices[0].message.content == expected["text"]
    assert_usage(completion.usage, expected["usage"])


# ------------------------------------------------------------------------------ headers and records


def test_headers_carry_invocation_and_cost(openai_client, scenario):
    expected = scenario["cases"]["openai"]["simple"]
    raw = openai_client.chat.completions.with_raw_response.create(
        model=expected["model"],
        messages=openai_messages("simple"),
        user="sdk-user-7",
    )
    invocation_id = raw.headers.get("x-invocation-id")
    assert invocation_id
    cost = float(raw.headers["x-gateway-cost-usd"])
    assert cost == pytest.approx(expected["cost_usd"], rel=1e-6)
    assert raw.parse().choices[0].message.content == expected["text"]
    stored = record(scenario, invocation_id)
    assert stored["id"] == invocation_id
    assert stored["userId"] == "sdk-user-7"
    assert stored["route"] == expected["model"].split("/", 1)[0]
    assert stored["status"] == "success"
    assert stored["stream"] is False
    assert stored["usageCost"] == pytest.approx(cost, abs=1e-9)


def test_stream_carries_invocation_id(openai_client, scenario):
    expected = scenario["cases"]["openai"]["simple_streaming"]
    raw = openai_client.chat.completions.with_raw_response.create(
        model=expected["model"], messages=openai_messages("simple_streaming"), stream=True
    )
    invocation_id = raw.headers.get("x-invocation-id")
    assert invocation_id
    text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    assert text == expected["text"]
    stored = record(scenario, invocation_id)
    assert stored["stream"] is True
    assert stored["status"] == "success"


# ------------------------------------------------------------------------------ errors


def test_bad_key_is_authentication_error(scenario):
    client = openai.OpenAI(
        base_url=f"{scenario['url']}/v1", api_key="not-a-gateway-key", max_retries=0
    )
    model = scenario["cases"]["openai"]["simple"]["model"]
    with pytest.raises(openai.AuthenticationError) as raised:
        chat(client, model, "simple")
    assert raised.value.status_code == 401
    with pytest.raises(openai.AuthenticationError):
        client.embeddings.create(model=scenario["embeddings"]["model"], input="x")


@pytest.mark.parametrize("model", ["no-such-route/gpt-4o-mini", "no-such-alias"])
@pytest.mark.parametrize("stream", [False, True])
def test_unknown_model_is_not_found(openai_client, model, stream):
    with pytest.raises(openai.NotFoundError) as raised:
        chat(openai_client, model, "simple", stream=stream)
    assert raised.value.status_code == 404
    assert raised.value.code == "model_not_found"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_429_is_rate_limit_error(openai_client, scenario, provider, stream):
    model = scenario["limited"][provider]
    with pytest.raises(openai.RateLimitError) as raised:
        chat(openai_client, model, "simple", stream=stream)
    assert raised.value.status_code == 429
    assert raised.value.response.headers.get("retry-after") == scenario["retry_after"]


def test_upstream_400_is_bad_request_and_not_retried(scenario):
    """The provider refusing the request (its 400) is the SDK's `BadRequestError` with the
    provider's message. With the SDK's default retries on: a 502 would be sent twice more (the
    runner checks the refusing upstream was called once per test)."""
    client = openai.OpenAI(base_url=f"{scenario['url']}/v1", api_key=scenario["key"])
    with pytest.raises(openai.BadRequestError) as raised:
        chat(client, scenario["refused"]["model"], "simple")
    assert raised.value.status_code == 400
    assert raised.value.type == "invalid_request_error"
    assert scenario["refused"]["message"] in raised.value.message


# ------------------------------------------------------------------------------ media

# An 8-byte PNG signature and a WAV header, padded: what the SDK sends is all that matters.
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(64)).decode()
WAV = base64.b64encode(b"RIFF" + bytes(64) + b"WAVEfmt ").decode()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_chat_with_an_image_data_url(openai_client, scenario, provider):
    """An `image_url` part with a data: URL reaches every provider (the runner checks each
    upstream got it in its own format)."""
    media = scenario["media"][provider]
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]}]
    completion = openai_client.chat.completions.create(model=media["model"], messages=messages)
    assert completion.choices[0].message.content == media["text"]


@pytest.mark.parametrize("provider", ("openai", "gemini"))
def test_chat_with_input_audio(openai_client, scenario, provider):
    media = scenario["media"][provider]
    audio = {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "Transcribe"}, audio]}]
    completion = openai_client.chat.completions.create(model=media["model"], messages=messages)
    assert completion.choices[0].message.content == media["text"]


def test_audio_to_a_provider_without_audio_is_bad_request(openai_client, scenario):
    """Anthropic takes no audio: a 400 naming the provider and the part, not a dropped part."""
    model = scenario["media"]["anthropic"]["model"]
    audio = {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "Transcribe"}, audio]}]
    with pytest.raises(openai.BadRequestError) as raised:
        openai_client.chat.completions.create(model=model, messages=messages)
    assert raised.value.status_code == 400
    assert "audio" in raised.value.message.lower()
    assert "anthropic" in raised.value.message.lower()

# ------------------------------------------------------------------------------ responses


def respond(client, model, case, **params):
    return client.responses.create(
        model=model,
        instructions=responses_instructions(case),
        input=responses_input(case),
        max_output_tokens=1000,
        **params,
    )


def assert_response_usage(usage, expected):
    assert usage is not None, "no usage"
    got = (usage.input_tokens, usage.output_tokens, usage.total_tokens)
    assert got == (expected["prompt"], expected["completion"], expected["total"])
    if expected["reasoning"] is not None:
        assert usage.output_tokens_details.reasoning_tokens == expected["reasoning"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_responses_text_is_kept_and_read_back(openai_client, scenario, provider):
    expected = scenario["cases"][provider]["simple"]
    response = respond(openai_client, expected["model"], "simple")
    assert response.object == "response"
    assert response.id.startswith("resp_")
    assert response.status == "completed"
    assert response.output_text == expected["text"]
    assert response.instructions == responses_instructions("simple")
    assert response.store is True
    assert_response_usage(response.usage, expected["usage"])
    kept = openai_client.responses.retrieve(response.id)
    assert kept.id == response.id
    assert kept.output_text == expected["text"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_responses_stream_helper(openai_client, scenario, provider):
    """`client.responses.stream` rebuilds the response from the typed events; its final
    response is `response.completed`'s."""
    expected = scenario["cases"][provider]["simple_streaming"]
    deltas = []
    types = []
    with openai_client.responses.stream(
        model=expected["model"],
        instructions=responses_instructions("simple"),
        input=responses_input("simple"),
        max_output_tokens=1000,
    ) as stream:
        for event in stream:
            types.append(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert "response.output_item.added" in types and "response.output_item.done" in types
    assert "".join(deltas) == expected["text"]
    assert final.output_text == expected["text"]
    assert final.status == "completed"
    assert_response_usage(final.usage, expected["usage"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_responses_function_tool_round_trip_with_previous_response_id(
    openai_client, scenario, provider
):
    """The model calls the function; the next request names the first response and sends only
    the call's output: the provider gets the whole conversation back (the runner checks the
    call and its result arrived) and answers with text."""
    expected = scenario["cases"][provider]["tool"]
    first = respond(openai_client, expected["model"], "tool", tools=responses_tools("tool"))
    calls = [item for item in first.output if item.type == "function_call"]
    assert [call.name for call in calls] == [call["name"] for call in expected["calls"]]
    assert json.loads(calls[0].arguments) == json.loads(expected["calls"][0]["arguments"])
    assert calls[0].call_id
    answer = scenario["cases"][provider]["tool_result"]
    second = openai_client.responses.create(
        model=answer["model"],
        previous_response_id=first.id,
        input=[
            {
                "type": "function_call_output",
                "call_id": calls[0].call_id,
                "output": scenario["tool_output"],
            }
        ],
        tools=responses_tools("tool"),
        max_output_tokens=1000,
    )
    assert second.previous_response_id == first.id
    assert second.output_text == answer["text"]
    assert_response_usage(second.usage, answer["usage"])


def test_responses_store_false_keeps_nothing(openai_client, scenario):
    expected = scenario["cases"]["openai"]["simple"]
    response = respond(openai_client, expected["model"], "simple", store=False)
    assert response.output_text == expected["text"]
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(response.id)
    with pytest.raises(openai.BadRequestError) as raised:
        openai_client.responses.create(
            model=expected["model"], previous_response_id=response.id, input="and then?"
        )
    assert raised.value.param == "previous_response_id"


def test_responses_delete(openai_client, scenario):
    expected = scenario["cases"]["anthropic"]["simple"]
    response = respond(openai_client, expected["model"], "simple")
    openai_client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(response.id)


def test_responses_hosted_tool_is_bad_request(openai_client, scenario):
    expected = scenario["cases"]["openai"]["simple"]
    with pytest.raises(openai.BadRequestError) as raised:
        respond(openai_client, expected["model"], "simple", tools=[{"type": "web_search"}])
    assert "web_search" in raised.value.message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_responses_with_an_image(openai_client, scenario, provider):
    """An `input_image` data URL reaches every provider in its own format (the runner checks)."""
    media = scenario["media"][provider]
    content = [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "low"},
    ]
    response = openai_client.responses.create(
        model=media["model"], input=[{"role": "user", "content": content}]
    )
    assert response.output_text == media["text"]


# ------------------------------------------------------------------------------ token counts


def test_responses_input_tokens(openai_client, scenario):
    """`responses.input_tokens.count` on an OpenAI route: counted by the gateway with the model's
    own tokenizer, exactly, nothing sent upstream."""
    expected = scenario["count_tokens"]["openai"]
    count = openai_client.responses.input_tokens.count(model=expected["model"], input="Hello!")
    assert count.object == "response.input_tokens"
    assert count.input_tokens == expected["tokens"]


# ------------------------------------------------------------------------------ images


def test_images_generate(openai_client, scenario):
    """DALL-E 3 at its dearest size and quality: the image's bytes, the rewritten prompt, the
    record of one image priced by the shipped table (hd 1024x1792: $0.12)."""
    case = scenario["images"]
    raw = openai_client.images.with_raw_response.generate(
        model=case["dall_e_3"],
        prompt=case["prompt"],
        size="1024x1792",
        quality="hd",
        response_format="b64_json",
    )
    answer = raw.parse()
    assert len(answer.data) == 1
    assert base64.b64decode(answer.data[0].b64_json) == base64.b64decode(case["pngs"][0])
    assert answer.data[0].revised_prompt == case["revised_prompt"]
    assert answer.created > 0
    invocation = record(scenario, raw.headers["x-invocation-id"])
    assert invocation["type"] == "images"
    assert invocation["usage"]["images"] == 1
    assert invocation["usageCost"] == pytest.approx(0.12)
    assert float(raw.headers["x-gateway-cost-usd"]) == pytest.approx(0.12)
    assert answer.data[0].b64_json not in json.dumps(invocation)


def test_images_generate_by_tokens(openai_client, scenario):
    """GPT Image: several images, billed by tokens, which the answer's usage tells."""
    case = scenario["images"]
    answer = openai_client.images.generate(
        model=case["gpt_image"], prompt=case["prompt"], n=2, output_format="png"
    )
    assert [base64.b64decode(image.b64_json) for image in answer.data] == [
        base64.b64decode(png) for png in case["pngs"]
    ]
    assert answer.usage.output_tokens == 2 * case["image_tokens"]
    assert answer.usage.input_tokens == len(case["prompt"].split())
    assert answer.usage.total_tokens == answer.usage.input_tokens + answer.usage.output_tokens
    assert answer.quality == "medium"


def test_images_generate_urls(openai_client, scenario):
    """The provider's URLs, as it gives them."""
    case = scenario["images"]
    answer = openai_client.images.generate(
        model=case["dall_e_2"], prompt=case["prompt"], n=2, response_format="url"
    )
    assert [image.url for image in answer.data] == [
        "https://images.fake-openai.test/0.png",
        "https://images.fake-openai.test/1.png",
    ]


@pytest.mark.parametrize("params", [{"n": 11}, {"response_format": "png"}, {"prompt": ""}])
def test_images_bad_request_names_the_field(openai_client, scenario, params):
    case = scenario["images"]
    request = {"model": case["dall_e_2"], "prompt": case["prompt"], **params}
    with pytest.raises(openai.BadRequestError) as raised:
        openai_client.images.generate(**request)
    assert raised.value.status_code == 400
    param = next(iter(params))
    assert raised.value.param == param
    assert raised.value.response.headers["x-invocation-id"]


# ------------------------------------------------------------------------------ audio


def make_wav(path, seconds, rate=8000):
    """A real WAV: a 440 Hz tone, 16-bit mono, written by Python's own `wave` module."""
    import math
    import wave

    frames = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate)))
        for i in range(int(seconds * rate))
    )
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(frames)
    return path


@pytest.fixture
def speech(scenario, tmp_path):
    case = scenario["audio"]
    return make_wav(tmp_path / case["file_name"], case["seconds"])


def test_audio_transcriptions_create(openai_client, scenario, speech):
    """Whisper: the transcript, the record of the seconds billed, priced by the shipped table,
    and the upload recorded without its bytes."""
    case = scenario["audio"]
    with speech.open("rb") as file:
        raw = openai_client.audio.transcriptions.with_raw_response.create(
            model=case["whisper"], file=file, language="en"
        )
    answer = raw.parse()
    assert answer.text == case["text"]
    invocation = record(scenario, raw.headers["x-invocation-id"])
    assert invocation["type"] == "transcription"
    assert invocation["usage"]["audio_seconds"] == case["billed_seconds"]
    assert invocation["usageCost"] == pytest.approx(case["billed_seconds"] * 0.0001)
    assert invocation["request"]["file"]["bytes"] == speech.stat().st_size
    assert invocation["request"]["language"] == "en"


def test_audio_transcriptions_verbose_json_and_subtitles(openai_client, scenario, speech):
    case = scenario["audio"]
    with speech.open("rb") as file:
        verbose = openai_client.audio.transcriptions.create(
            model=case["whisper"],
            file=file,
            response_format="verbose_json",
            timestamp_granularities=["word", "segment"],
        )
    assert verbose.text == case["text"]
    assert verbose.duration == pytest.approx(case["seconds"])
    assert [s.end for s in verbose.segments] == [case["seconds"] / 2, case["seconds"]]
    assert [w.word for w in verbose.words] == case["text"].split()
    with speech.open("rb") as file:
        srt = openai_client.audio.transcriptions.create(
            model=case["whisper"], file=file, response_format="srt"
        )
    assert srt.startswith("1\n00:00:00,000 --> 00:00:00,750\n"), srt
    with speech.open("rb") as file:
        vtt = openai_client.audio.transcriptions.create(
            model=case["whisper"], file=file, response_format="vtt"
        )
    assert vtt.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:00.750\n"), vtt


def test_audio_translations_create(openai_client, scenario, speech):
    case = scenario["audio"]
    with speech.open("rb") as file:
        answer = openai_client.audio.translations.create(model=case["whisper"], file=file)
    assert answer.text == case["translated"]


def test_audio_transcriptions_billed_by_tokens(openai_client, scenario, speech):
    case = scenario["audio"]
    with speech.open("rb") as file:
        answer = openai_client.audio.transcriptions.create(model=case["gpt"], file=file)
    assert answer.text == case["text"]
    assert answer.usage.type == "tokens"
    assert answer.usage.input_token_details.audio_tokens > 0


def test_audio_speech_streamed_to_a_file(openai_client, scenario, tmp_path):
    """tts-1: the audio streamed to a file as it arrives, byte for byte what the provider spoke,
    recorded as its summary and priced by the character."""
    case = scenario["speech"]
    target = tmp_path / "speech.mp3"
    with openai_client.audio.speech.with_streaming_response.create(
        model=case["tts"], voice="alloy", input=case["input"]
    ) as response:
        assert response.headers["content-type"] == "audio/mpeg"
        invocation_id = response.headers["x-invocation-id"]
        response.stream_to_file(target)
    assert target.read_bytes() == case["mp3"].encode()
    invocation = record(scenario, invocation_id)
    assert invocation["type"] == "speech"
    assert invocation["usage"]["characters"] == case["characters"]
    assert invocation["usageCost"] == pytest.approx(case["characters"] * 15 / 1e6)
    assert invocation["response"]["bytes"] == len(case["mp3"])


def test_audio_speech_in_another_format_billed_by_tokens(openai_client, scenario):
    case = scenario["speech"]
    answer = openai_client.audio.speech.create(
        model=case["gpt"], voice="alloy", input=case["input"], response_format="wav",
        instructions="Calm and slow.",
    )
    assert answer.content == case["wav"].encode()
    assert answer.response.headers["content-type"] == "audio/wav"
    invocation = record(scenario, answer.response.headers["x-invocation-id"])
    usage = invocation["usage"]
    assert [usage["prompt_tokens"], usage["completion_tokens"]] == case["tokens"]


def test_audio_speech_with_an_unknown_voice_is_bad_request(openai_client, scenario):
    case = scenario["speech"]
    with pytest.raises(openai.BadRequestError) as raised:
        openai_client.audio.speech.create(model=case["tts"], voice="nobody", input="Hi")
    assert raised.value.status_code == 400
    assert "voice" in raised.value.message


def test_audio_file_that_is_not_audio_is_bad_request(openai_client, scenario, tmp_path):
    case = scenario["audio"]
    notes = tmp_path / "notes.txt"
    notes.write_text("just text")
    with notes.open("rb") as file, pytest.raises(openai.BadRequestError) as raised:
        openai_client.audio.transcriptions.create(model=case["whisper"], file=file)
    assert "Invalid file format" in raised.value.message
