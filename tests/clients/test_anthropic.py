"""The official `anthropic` SDK, unchanged, against the gateway's Anthropic-format endpoint
(`/v1/messages`), on routes of the openai, anthropic and gemini plugins replaying recorded
traffic."""

import base64
import json

import anthropic
import pytest

from scenario import (
    ANTHROPIC_STOP,
    PROVIDERS,
    TOOL_CASES,
    anthropic_messages,
    anthropic_system,
    anthropic_tools,
    record,
)

MAX_TOKENS = 1000


def request(model, case, **params):
    """The keyword arguments of `messages.create` / `messages.stream` for `case`."""
    return dict(
        model=model,
        max_tokens=MAX_TOKENS,
        system=anthropic_system(case),
        messages=anthropic_messages(case),
        **params,
    )


def assert_usage(usage, expected):
    # The recordings read no tokens from a cache: all prompt tokens are input tokens.
    assert usage.input_tokens == expected["prompt"]
    assert usage.output_tokens == expected["completion"]
    assert usage.cache_read_input_tokens in (None, 0)


def texts(message):
    return "".join(block.text for block in message.content if block.type == "text")


def assert_tool_uses(message, expected):
    """The message's tool_use blocks are the recorded calls: names, ids (made up, but present
    and distinct, where the provider has none) and inputs."""
    uses = [block for block in message.content if block.type == "tool_use"]
    assert [use.name for use in uses] == [want["name"] for want in expected]
    for use, want in zip(uses, expected):
        if want["id"] is not None:
            assert use.id == want["id"]
        else:
            assert use.id
        assert use.input == json.loads(want["arguments"])
    assert len({use.id for use in uses}) == len(uses), "tool_use ids repeat"


def assert_message(message, expected):
    assert message.type == "message"
    assert message.role == "assistant"
    assert message.id
    assert message.model
    assert texts(message) == expected["text"]
    assert message.stop_reason == ANTHROPIC_STOP[expected["finish"]]
    assert_tool_uses(message, expected["calls"])
    assert_usage(message.usage, expected["usage"])


# ------------------------------------------------------------------------------ messages


@pytest.mark.parametrize("provider", PROVIDERS)
def test_messages_create(anthropic_client, scenario, provider):
    expected = scenario["cases"][provider]["simple"]
    message = anthropic_client.messages.create(**request(expected["model"], "simple"))
    assert_message(message, expected)
    assert [block.type for block in message.content] == ["text"]
    assert message.stop_sequence is None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_messages_stream(anthropic_client, scenario, provider):
    expected = scenario["cases"][provider]["simple_streaming"]
    with anthropic_client.messages.stream(
        **request(expected["model"], "simple_streaming")
    ) as stream:
        text = "".join(stream.text_stream)
        message = stream.get_final_message()
    assert text == expected["text"]
    assert_message(message, expected)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_messages_raw_stream_events(anthropic_client, scenario, provider):
    """The event sequence of the Messages API: message_start, each block's
    start/deltas/stop, message_delta with the stop reason and usage, message_stop."""
    expected = scenario["cases"][provider]["simple_streaming"]
    stream = anthropic_client.messages.create(
        **request(expected["model"], "simple_streaming"), stream=True
    )
    events = [event for event in stream if event.type != "ping"]
    kinds = [event.type for event in events]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1] == "content_block_start"
    assert kinds[-3] == "content_block_stop"
    assert set(kinds[2:-3]) == {"content_block_delta"}
    deltas = [event.delta for event in events if event.type == "content_block_delta"]
    assert "".join(delta.text for delta in deltas) == expected["text"]
    message_delta = events[-2]
    assert message_delta.delta.stop_reason == ANTHROPIC_STOP[expected["finish"]]
    assert message_delta.usage.output_tokens == expected["usage"]["completion"]


# ------------------------------------------------------------------------------ tools


@pytest.mark.parametrize("case", TOOL_CASES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_use(anthropic_client, scenario, provider, case):
    expected = scenario["cases"][provider][case]
    message = anthropic_client.messages.create(
        **request(expected["model"], case, tools=anthropic_tools(case))
    )
    assert_message(message, expected)


@pytest.mark.parametrize("case", TOOL_CASES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_use_streamed(anthropic_client, scenario, provider, case):
    """The SDK reassembles each tool_use input from its input_json deltas."""
    case = f"{case}_streaming"
    expected = scenario["cases"][provider][case]
    with anthropic_client.messages.stream(
        **request(expected["model"], case, tools=anthropic_tools(case))
    ) as stream:
        events = list(stream)
        message = stream.get_final_message()
    assert_message(message, expected)
    # Every input arrived as JSON pieces, and each finished block is the whole call.
    partial = "".join(event.partial_json for event in events if event.type == "input_json")
    assert partial
    stopped = [
        event.content_block
        for event in events
        if event.type == "content_block_stop" and event.content_block.type == "tool_use"
    ]
    assert [block.input for block in stopped] == [
        json.loads(call["arguments"]) for call in expected["calls"]
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_result_round_trip(anthropic_client, scenario, provider):
    """The assistant's tool_use and the user's tool_result go back to the provider (the runner
    checks they arrived), which answers with text."""
    expected = scenario["cases"][provider]["tool_result"]
    call = expected["feed"]
    said = [{"type": "text", "text": expected["feed_text"]}] if expected["feed_text"] else []
    use = {
        "type": "tool_use",
        "id": call["id"],
        "name": call["name"],
        "input": json.loads(call["arguments"]),
    }
    result = {
        "type": "tool_result",
        "tool_use_id": call["id"],
        "content": scenario["tool_output"],
    }
    messages = anthropic_messages("tool") + [
        {"role": "assistant", "content": said + [use]},
        {"role": "user", "content": [result]},
    ]
    message = anthropic_client.messages.create(
        model=expected["model"],
        max_tokens=MAX_TOKENS,
        system=anthropic_system("tool"),
        messages=messages,
        tools=anthropic_tools("tool"),
    )
    assert_message(message, expected)


# ------------------------------------------------------------------------------ headers


def test_headers_carry_invocation_and_cost(anthropic_client, scenario):
    expected = scenario["cases"]["openai"]["simple"]
    raw = anthropic_client.messages.with_raw_response.create(
        **request(expected["model"], "simple", metadata={"user_id": "sdk-user-9"})
    )
    invocation_id = raw.headers.get("x-invocation-id")
    assert invocation_id
    assert float(raw.headers["x-gateway-cost-usd"]) == pytest.approx(
        expected["cost_usd"], rel=1e-6
    )
    assert texts(raw.parse()) == expected["text"]
    stored = record(scenario, invocation_id)
    assert stored["userId"] == "sdk-user-9"
    assert stored["status"] == "success"


def test_alias(anthropic_client, scenario):
    expected = scenario["aliases"]["claude"]
    message = anthropic_client.messages.create(**request("claude", "simple"))
    assert texts(message) == expected["text"]


# ------------------------------------------------------------------------------ errors


def test_bad_key_is_authentication_error(scenario):
    client = anthropic.Anthropic(
        base_url=scenario["url"], api_key="not-a-gateway-key", max_retries=0
    )
    model = scenario["cases"]["anthropic"]["simple"]["model"]
    with pytest.raises(anthropic.AuthenticationError) as raised:
        client.messages.create(**request(model, "simple"))
    assert raised.value.status_code == 401
    assert raised.value.type == "authentication_error"


@pytest.mark.parametrize("model", ["no-such-route/claude-sonnet-4-5", "no-such-alias"])
@pytest.mark.parametrize("stream", [False, True])
def test_unknown_model_is_not_found(anthropic_client, model, stream):
    with pytest.raises(anthropic.NotFoundError) as raised:
        anthropic_client.messages.create(**request(model, "simple"), stream=stream)
    assert raised.value.status_code == 404
    assert raised.value.type == "not_found_error"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_429_is_rate_limit_error(anthropic_client, scenario, provider, stream):
    model = scenario["limited"][provider]
    with pytest.raises(anthropic.RateLimitError) as raised:
        anthropic_client.messages.create(**request(model, "simple"), stream=stream)
    assert raised.value.status_code == 429
    assert raised.value.type == "rate_limit_error"
    assert raised.value.response.headers.get("retry-after") == scenario["retry_after"]


def test_upstream_400_is_bad_request_and_not_retried(scenario):
    """As with OpenAI's SDK: the provider's 400 is `BadRequestError`, sent once even with the
    SDK's default retries on."""
    client = anthropic.Anthropic(base_url=scenario["url"], api_key=scenario["key"])
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.create(**request(scenario["refused"]["model"], "simple"))
    assert raised.value.status_code == 400
    assert raised.value.type == "invalid_request_error"
    assert scenario["refused"]["message"] in raised.value.message


# ------------------------------------------------------------------------------ media

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(64)).decode()
PDF = base64.b64encode(b"%PDF-1.4\n" + bytes(64) + b"\n%%EOF").decode()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_messages_with_an_image_and_a_pdf(anthropic_client, scenario, provider):
    """Image and document blocks reach every provider (the runner checks each upstream got
    them in its own format)."""
    media = scenario["media"][provider]
    content = [
        {"type": "text", "text": "Compare these."},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {
            "type": "document",
            "title": "Report",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        },
    ]
    message = anthropic_client.messages.create(
        model=media["model"], max_tokens=MAX_TOKENS, messages=[{"role": "user", "content": content}]
    )
    assert message.content[-1].type == "text"
    assert message.content[-1].text == media["text"]


def test_streamed_thinking_reaches_the_client_with_its_signature(anthropic_client, scenario):
    """`thinking` enabled: the thinking deltas and the block's signature stream to the SDK,
    which assembles the blocks as Anthropic's own answer would give them."""
    expected = scenario["thinking"]
    with anthropic_client.messages.stream(
        model=expected["model"],
        max_tokens=4096,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=[{"role": "user", "content": "Think, then say hi"}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert "thinking" in kinds and "signature" in kinds, kinds
    assert kinds.index("thinking") < kinds.index("text"), kinds
    thinking = final.content[0]
    assert thinking.type == "thinking"
    assert thinking.thinking == expected["thinking"]
    assert thinking.signature == expected["signature"]
    assert final.content[1].type == "redacted_thinking"
    assert final.content[-1].text == expected["text"]
    assert final.stop_reason == "stop_sequence"
    assert final.stop_sequence == "END"


# ------------------------------------------------------------------------------ models


def test_models_list_in_anthropic_shape(anthropic_client, scenario):
    """The SDK's `models.list()` reads the gateway's names from Anthropic's page shape."""
    page = anthropic_client.models.list()
    ids = [model.id for model in page]
    missing = set(scenario["listed"]) - set(ids)
    assert not missing, f"not listed: {sorted(missing)}; listed: {ids}"
    assert all(model.type == "model" for model in page.data)
    assert page.has_more is False
    assert anthropic_client.models.retrieve("fast").id == "fast"
    with pytest.raises(anthropic.NotFoundError):
        anthropic_client.models.retrieve("no-such-route/claude")


# ------------------------------------------------------------------------------ token counts


def test_count_tokens(anthropic_client, scenario):
    """`messages.count_tokens`: Anthropic's own count on an Anthropic route (the body holds only
    what Anthropic takes, or its fake refuses it); the gateway's, with the model's tokenizer, on
    an OpenAI route."""
    for family in ("anthropic", "openai"):
        expected = scenario["count_tokens"][family]
        count = anthropic_client.messages.count_tokens(
            model=expected["model"],
            messages=[{"role": "user", "content": "Hello!"}],
        )
        assert count.input_tokens == expected["tokens"], family
