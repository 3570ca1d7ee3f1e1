"""The provider side of the SDK, natively: requests, the drivers against scripted responses,
the error mapping and the exports' error handling. Run by `cargo xtask test` (see the README)
against componentize-py's stub bindings of `wit/`, with the host imports replaced here."""

import json
import unittest
from unittest import mock

from componentize_py_types import Err
import fake_host  # noqa: F401 (the log, natively)
from wit_world.imports import http, types

from gateway_plugin import ProviderError, embedded_error, openai_usage, testing, upstream_error, usage
from gateway_plugin.provider import (
    Answer,
    Call,
    HttpProvider,
    Request,
    Response,
    Sink,
    StreamDecoder,
    provider_world,
    read_completion,
    read_stream,
)
from gateway_plugin.sse import Event


def route(settings="", base_url="http://up/v1", api_key="sk-1"):
    return types.Route("r", base_url, api_key, settings, [("token", "t0k")])


def chat(*texts):
    messages = [
        types.Message(types.Role.USER, [types.Part_Text(t)], None, None, [], None, False)
        for t in texts
    ]
    return types.Prompt_Chat(messages)


def call(prompt=None, params="", settings=""):
    prompt = prompt or types.Prompt_Text("hi")
    output = types.OutputLimit(None, 1)
    request = types.CompletionRequest(route(settings), "m-1", prompt, [], None, None, output, params)
    return Call(request)


def sse(*events, content_type="text/event-stream"):
    body = "".join(f"data: {e}\n\n" for e in events).encode()
    # Split mid-event, so the parser's joins count.
    return Response.from_chunks(200, [("Content-Type", content_type)], [body[:7], body[7:]])


class Lines(StreamDecoder):
    """`data: <text>` events ending with `data: [END]`; `usage P C`, `stop`."""

    def body(self, data, answer):
        answer.text(0, data.decode())
        answer.complete()

    def event(self, event, answer):
        words = event.data.split(" ")
        if event.data == "[END]":
            answer.end()
        elif words[0] == "stop":
            answer.finish_reason(0, "stop")
            answer.complete()
        elif words[0] == "usage":
            answer.usage(usage(int(words[1]), int(words[2])))
        elif words[0] == "fail":
            raise ProviderError.failed("upstream said fail")
        else:
            answer.text(0, event.data)


class CallTest(unittest.TestCase):
    def test_messages_params_settings(self):
        c = call(chat("a", "b"), params='{"temperature": 0.2, "model": "x"}')
        self.assertEqual(c.messages(), [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        self.assertEqual(c.params("model"), {"temperature": 0.2})
        self.assertEqual(call().messages(), [{"role": "user", "content": "hi"}])
        self.assertEqual(call().text, "hi")
        self.assertIsNone(c.text)
        self.assertEqual(c.secret("token"), "t0k")
        self.assertIsNone(c.secret("other"))

    def test_media_is_refused(self):
        image = types.Part_Image(types.Image(types.Source_Url("https://x/i.png"), None, None))
        message = types.Message(types.Role.USER, [image], None, None, [], None, False)
        with self.assertRaises(ProviderError) as caught:
            call(types.Prompt_Chat([message])).messages("p")
        self.assertEqual(caught.exception.kind, "invalid_request")
        self.assertEqual(caught.exception.message, "p does not take image parts")

    def test_bad_params_are_the_callers_fault(self):
        with self.assertRaises(ProviderError) as caught:
            call(params="[1]").params()
        self.assertEqual(caught.exception.kind, "invalid_request")

    def test_settings_defaults_and_checks(self):
        self.assertEqual(call().settings(legacy=False), {"legacy": False})
        self.assertEqual(call(settings='{"legacy": true}').settings(legacy=False), {"legacy": True})
        self.assertEqual(call(settings='{"t": 1}').settings(t=0.5), {"t": 1})
        with self.assertRaises(ProviderError) as caught:
            call(settings='{"n": true}').settings(n=0)
        self.assertEqual(caught.exception.message, "route `r`: setting `n` must be an integer")
        for bad, says in [
            ('{"legacy": 1}', "route `r`: setting `legacy` must be a boolean"),
            ('{"legcy": true}', "route `r`: unknown setting `legcy` (known: legacy)"),
            ("[]", "route `r`: settings must be a JSON object"),
        ]:
            with self.assertRaises(ProviderError) as caught:
                call(settings=bad).settings(legacy=False)
            self.assertEqual((caught.exception.kind, caught.exception.message), ("failed", says))

    def test_base_url(self):
        c = call()
        c.route.base_url = " http://up/v1// "
        self.assertEqual(c.base_url(), "http://up/v1")
        c.route.base_url = "/"
        with self.assertRaises(ProviderError) as caught:
            c.base_url("http://HOST/v1")
        self.assertEqual(caught.exception.message, "route `r` has no base_url; set it to http://HOST/v1")


class RequestTest(unittest.TestCase):
    def test_builder(self):
        r = (
            Request.post("http://up/v1/chat")
            .header("Authorization", "Bearer old")
            .api_key("sk")
            .streaming(True)
            .json({"model": "m", "é": 1})
        )
        self.assertEqual(r.header_value("authorization"), "Bearer sk")
        self.assertEqual(r.header_value("accept"), "text/event-stream")
        self.assertEqual(r.header_value("content-type"), "application/json")
        self.assertEqual(json.loads(r.body), {"model": "m", "é": 1})
        self.assertNotIn("sk", repr(r))
        self.assertEqual(Request.get("u").api_key("").headers, [])
        self.assertEqual(Request.get("u").api_key("k", "x-api-key").header_value("x-api-key"), "k")

    def test_send_maps_host_errors(self):
        cases = [
            (http.HttpError_ForbiddenHost("evil:80"), "failed", "does not allow requests to evil:80"),
            (http.HttpError_Timeout("10 s"), "timeout", "did not answer in time"),
            (http.HttpError_TooLarge(5), "failed", "larger than the gateway allows (5 bytes)"),
            (http.HttpError_Transport("reset"), "failed", "HTTP failure sending the request: reset"),
        ]
        for error, kind, says in cases:
            with mock.patch.object(http, "send", side_effect=Err(error)):
                with self.assertRaises(ProviderError) as caught:
                    Request.get("http://evil/").send()
            self.assertEqual(caught.exception.kind, kind)
            self.assertIn(says, caught.exception.message)

    def test_send_reads_the_host_body_and_releases_it(self):
        body = mock.MagicMock()
        body.read.side_effect = [b"he", b"", b"llo", None]
        answer = http.Response(200, [("content-type", "application/json")], body)
        with mock.patch.object(http, "send", return_value=answer) as send:
            response = Request.post("http://up/x").json({}).send()
        sent = send.call_args.args[0]
        self.assertEqual((sent.method, sent.url, sent.body), ("POST", "http://up/x", b"{}"))
        self.assertEqual(response.read(), b"hello")
        body.__exit__.assert_called_once()


class ErrorsTest(unittest.TestCase):
    def test_upstream_error_shapes(self):
        e = upstream_error(401, b'{"error":{"message":"bad key","type":"x"}}')
        self.assertEqual((e.kind, e.status, e.message, e.retry_after), ("upstream", 401, "bad key", None))
        self.assertEqual(upstream_error(400, b'{"error":"nope"}').message, "nope")
        self.assertEqual(upstream_error(400, b'{"message":"m"}').message, "m")
        self.assertEqual(upstream_error(502, b"  <html>x</html>\n").message, "<html>x</html>")
        self.assertEqual(upstream_error(503, b"").message, "the provider answered HTTP 503 without a message")
        self.assertEqual(len(upstream_error(500, b"x" * 5000).message), 1000)
        self.assertEqual(upstream_error(429, b"", "7").retry_after, 7)
        self.assertEqual(upstream_error(429, b"", "1.2").retry_after, 2)
        self.assertEqual(upstream_error(429, b"", "Wed, 21 Oct 2015 07:28:00 GMT").retry_after, 0)
        self.assertIsNone(upstream_error(429, b"", "soon").retry_after)

    def test_embedded_error(self):
        e = embedded_error({"message": "quota", "status": "RESOURCE_EXHAUSTED"})
        self.assertEqual((e.status, e.message), (429, "quota"))
        self.assertEqual(embedded_error({"message": "x", "code": "400"}).status, 400)
        self.assertEqual(embedded_error({"message": "x", "code": 200}).status, 500)
        self.assertEqual(embedded_error("plain").message, "plain")

    def test_to_wit(self):
        wit = ProviderError.upstream(429, "slow", 3).to_wit()
        self.assertEqual(wit, types.ProviderError_Upstream(types.UpstreamError(429, "slow", 3)))
        self.assertEqual(ProviderError.timeout("t").to_wit(), types.ProviderError_Timeout("t"))
        self.assertEqual(
            ProviderError.invalid_request("i").to_wit(), types.ProviderError_InvalidRequest("i")
        )
        self.assertEqual(
            ProviderError.malformed("eof").to_wit(),
            types.ProviderError_Failed("malformed response from upstream: eof"),
        )

    def test_openai_usage(self):
        u = openai_usage(
            {
                "prompt_tokens": 5,
                "completion_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 2, "audio_tokens": 1},
                "completion_tokens_details": {"reasoning_tokens": 3},
            }
        )
        self.assertEqual((u.prompt_tokens, u.completion_tokens, u.total_tokens), (5, 7, 12))
        self.assertEqual((u.cached_prompt_tokens, u.reasoning_tokens, u.audio_prompt_tokens), (2, 3, 1))
        self.assertIsNone(openai_usage(None))
        self.assertEqual(openai_usage({"prompt_tokens": 1, "total_tokens": 9}).total_tokens, 9)


class DriverTest(unittest.TestCase):
    def test_stream_sends_text_and_usage_after_each_event(self):
        sink = Sink.buffered()
        completion = read_stream(
            sse("Hel", "lo", "usage 3 2", "stop", "[END]", "ignored"), sink, "m-1", Lines()
        )
        self.assertEqual(completion.choices[0].text, "Hello")
        self.assertEqual(completion.choices[0].finish_reason, types.FinishReason_Stop())
        self.assertEqual(completion.usage, usage(3, 2))
        sent = [([d.text for d in c.deltas], c.usage and c.usage.total_tokens) for c in sink.sent]
        self.assertEqual(sent, [(["Hel"], None), (["lo"], None), ([], 5)])

    def test_a_stream_cut_short_is_an_error(self):
        sink = Sink.buffered()
        with self.assertRaises(ProviderError) as caught:
            read_stream(sse("Hi", "usage 1 1"), sink, "m", Lines())
        self.assertEqual(caught.exception.message, "stream ended early")
        self.assertEqual(len(sink.sent), 2)

    def test_decoder_errors_and_statuses_end_the_call(self):
        with self.assertRaises(ProviderError) as caught:
            read_stream(sse("Hi", "fail"), Sink.buffered(), "m", Lines())
        self.assertEqual(caught.exception.message, "upstream said fail")
        response = Response.from_chunks(429, [("Retry-After", "7")], [b'{"error":{"message":"slow down"}}'])
        with self.assertRaises(ProviderError) as caught:
            read_completion(response, "m", Lines())
        e = caught.exception
        self.assertEqual((e.kind, e.status, e.message, e.retry_after), ("upstream", 429, "slow down", 7))

    def test_a_json_answer_to_a_stream_request_is_one_chunk(self):
        response = Response.from_chunks(200, [("content-type", "application/json")], [b"Hel", b"lo"])
        sink = Sink.buffered()
        completion = read_stream(response, sink, "m", Lines())
        self.assertEqual(completion.choices[0].text, "Hello")
        self.assertEqual([d.text for c in sink.sent for d in c.deltas], ["Hello"])

    def test_default_event_reads_json_data_and_done(self):
        class Json(StreamDecoder):
            def body(self, data, answer):
                answer.text(0, json.loads(data)["t"])

        completion = read_stream(sse('{"t":"a"}', "", '{"t":"b"}', "[DONE]"), Sink.buffered(), "m", Json())
        self.assertEqual(completion.choices[0].text, "ab")

    def test_answer_tool_calls_reasoning_and_logprobs(self):
        answer = Answer("m")
        answer.model("")
        answer.tool_call(0, 0, "c1", "f", None)
        answer.tool_call(0, 0, None, None, '{"a"')
        first = answer.take_unsent().tool_calls
        answer.tool_call(0, 0, "c1", "f", ":1}")
        answer.tool_call(0, 1, None, "g", "{}")
        second = answer.take_unsent().tool_calls
        seen = lambda ds: [(d.call, d.id, d.name, d.arguments) for d in ds]  # noqa: E731
        self.assertEqual(seen(first), [(0, "c1", "f", '{"a"')])
        self.assertEqual(seen(second), [(0, None, None, ":1}"), (1, None, "g", "{}")])
        answer.reasoning(0, 2, "think")
        answer.reasoning(0, 2, "", signature="sig")
        answer.logprobs(0, {"content": [1], "refusal": None})
        answer.logprobs(0, {"content": [2], "refusal": "x"})
        self.assertIsNone(answer.take_unsent().usage)
        completion = answer.finish()
        choice = completion.choices[0]
        self.assertEqual(completion.model, "m")
        self.assertEqual([(c.id, c.arguments) for c in choice.tool_calls], [("c1", '{"a":1}'), ("call_0_1", "{}")])
        self.assertEqual(choice.function_call, types.FunctionCall("f", '{"a":1}'))
        self.assertEqual(choice.reasoning, [types.Reasoning("think", "sig", None)])
        self.assertEqual(json.loads(choice.logprobs), {"content": [1, 2], "refusal": "x"})


class Echo(HttpProvider):
    NAME = "echo-py"
    MODELS = [("m-1", 0.5, 1.5)]

    def request(self, call, stream):
        return Request.post(f"{call.base_url()}/echo").json({"m": call.model})

    def body(self, data, answer):
        answer.text(0, json.loads(data)["text"])
        answer.finish_reason(0, "length")
        answer.complete()


class WorldTest(unittest.TestCase):
    """The exports as the gateway calls them, through the SDK's fake host."""

    world = provider_world(Echo)

    def call(self):
        return testing.Call.text("m-1", "hi").base_url("http://up/v1")

    def test_info(self):
        info = self.world().info()
        self.assertEqual((info.name, info.version), ("echo-py", "0.1.0"))
        self.assertEqual(info.models, [types.ModelPrice("m-1", 0.5, 1.5)])

    def test_complete(self):
        run = self.call().complete(self.world, lambda sent: testing.json(200, {"text": "yo"}))
        self.assertEqual(run.result.choices[0].text, "yo")
        self.assertEqual(run.result.choices[0].finish_reason, types.FinishReason_Length())
        self.assertEqual([(s.method, s.url, s.json()) for s in run.sent], [("POST", "http://up/v1/echo", {"m": "m-1"})])

    def test_provider_errors_become_wit_errors(self):
        run = self.call().complete(
            self.world, lambda sent: testing.json(404, {"error": {"message": "no model"}})
        )
        self.assertEqual(run.error.to_wit(), types.ProviderError_Upstream(types.UpstreamError(404, "no model", None)))
        with self.assertRaises(ProviderError):
            run.result
        run = testing.Call.embedding("m", ["x"]).embed(self.world, lambda sent: testing.json(200, {}))
        self.assertEqual(run.error.to_wit(), types.ProviderError_InvalidRequest("echo-py does not support embeddings"))
        self.assertEqual(run.sent, [])

    def test_a_token_count_is_the_gateways_unless_the_provider_counts(self):
        self.assertIsNone(self.world().count_tokens(self.call().request))

        class Counting(Echo):
            def count_tokens(self, call):
                return types.TokenCount(len(call.model), False)

        count = provider_world(Counting)().count_tokens(self.call().request)
        self.assertEqual(count, types.TokenCount(3, False))

    def test_rerank_is_refused_unless_the_provider_reranks(self):
        request = types.RerankRequest(self.call().route, "r-1", "q", ["a", "bb", "ccc"], 2, "{}")
        with self.assertRaises(Err) as refused:
            self.world().rerank(request)
        self.assertEqual(refused.exception.value, types.ProviderError_InvalidRequest("echo-py does not support rerank"))

        class Plain:
            """A provider class of its own, with no `rerank`: refused the same, by its name."""

            def info(self):
                return types.PluginInfo("plain-py", "0.1.0", [])

        with self.assertRaises(Err) as refused:
            provider_world(Plain)().rerank(request)
        self.assertEqual(refused.exception.value, types.ProviderError_InvalidRequest("plain-py does not support rerank"))

        class Ranking(Echo):
            def rerank(self, call):
                documents = call.request.documents
                order = sorted(range(len(documents)), key=lambda i: -len(documents[i]))
                results = [types.RerankResult(i, float(len(documents[i]))) for i in order]
                return types.Reranking(call.model, results[: call.request.top_n], None, 1)

        reranking = provider_world(Ranking)().rerank(request)
        self.assertEqual(
            reranking,
            types.Reranking("r-1", [types.RerankResult(2, 3.0), types.RerankResult(1, 2.0)], None, 1),
        )

        class Refusing(Echo):
            def rerank(self, call):
                raise ProviderError.invalid_request("no documents today")

        with self.assertRaises(Err) as refused:
            provider_world(Refusing)().rerank(request)
        self.assertEqual(refused.exception.value, types.ProviderError_InvalidRequest("no documents today"))

    def test_image_generation_is_refused_unless_the_provider_makes_images(self):
        request = types.ImageRequest(self.call().route, "i-1", "a cat", 2, "1024x1024", None, "{}")
        with self.assertRaises(Err) as refused:
            self.world().generate_images(request)
        self.assertEqual(
            refused.exception.value, types.ProviderError_InvalidRequest("echo-py does not support image generation")
        )

        class Drawing(Echo):
            def generate_images(self, call):
                images = [
                    types.GeneratedImage(types.Source_Bytes(bytes([i])), "image/png", None) for i in range(call.request.n)
                ]
                return types.Images(call.model, images, None, call.request.size, "standard")

        images = provider_world(Drawing)().generate_images(request)
        self.assertEqual([image.source for image in images.images], [types.Source_Bytes(b"\x00"), types.Source_Bytes(b"\x01")])
        self.assertEqual((images.size, images.quality), ("1024x1024", "standard"))

    def test_transcription_is_refused_unless_the_provider_transcribes(self):
        request = types.TranscriptionRequest(self.call().route, "w-1", b"RIFF", "a.wav", "audio/wav", False, "{}")
        with self.assertRaises(Err) as refused:
            self.world().transcribe(request)
        self.assertEqual(
            refused.exception.value, types.ProviderError_InvalidRequest("echo-py does not support transcription")
        )

        class Writing(Echo):
            def transcribe(self, call):
                text = f"{len(call.request.audio)} bytes of {call.request.file_name}"
                segments = [types.TranscriptSegment(0.0, 1.5, text)]
                return types.Transcription(call.model, text, None, 1.5, segments, [], None, 2)

        transcription = provider_world(Writing)().transcribe(request)
        self.assertEqual(transcription.text, "4 bytes of a.wav")
        self.assertEqual(transcription.seconds, 2)

    def test_speech_is_refused_unless_the_provider_speaks(self):
        request = types.SpeechRequest(self.call().route, "tts-1", "hello", "alloy", "mp3", "{}")
        with self.assertRaises(Err) as refused:
            self.world().speak(request)
        self.assertEqual(refused.exception.value, types.ProviderError_InvalidRequest("echo-py does not support speech"))

        class Plain:
            def info(self):
                return types.PluginInfo("plain-py", "0.1.0", [])

        with self.assertRaises(Err) as refused:
            provider_world(Plain)().speak(request)
        self.assertEqual(refused.exception.value, types.ProviderError_InvalidRequest("plain-py does not support speech"))

        class Speaking(Echo):
            def speak(self, call, sink):
                for word in call.request.input.split(" "):
                    sink.send_audio(f"{call.request.voice}:{word};".encode())
                sink.send_audio(b"")  # nothing
                return types.Speech(call.model, usage(1, 2))

        sent = []
        request = types.SpeechRequest(self.call().route, "tts-1", "hello there", "coral", "wav", "{}")
        with mock.patch("wit_world.imports.sink.send_audio", side_effect=sent.append):
            speech = provider_world(Speaking)().speak(request)
        self.assertEqual(sent, [b"coral:hello;", b"coral:there;"])
        self.assertEqual(speech, types.Speech("tts-1", usage(1, 2)))

        # The caller gone: the send fails, the plugin stops, the export returns the error.
        with mock.patch("wit_world.imports.sink.send_audio", side_effect=Err(None)) as send:
            with self.assertRaises(Err) as gone:
                provider_world(Speaking)().speak(request)
        self.assertEqual(gone.exception.value, types.ProviderError_Failed("the caller disconnected"))
        self.assertEqual(send.call_count, 1)

    def test_a_buffered_sink_keeps_the_audio(self):
        sink = Sink.buffered()
        sink.send_audio(b"ID3")
        sink.send_audio(bytearray(b"\x00\x01"))
        sink.send_audio(b"")
        self.assertEqual(sink.audio, [b"ID3", b"\x00\x01"])
        self.assertEqual(sink.sent, [])

    def test_other_exceptions_are_logged_once_and_end_the_instance(self):
        class Broken(Echo):
            def request(self, call, stream):
                return self.lookup({})

            def lookup(self, table):
                return table["model"]

        host = testing.Host()
        with self.assertRaises(testing.PluginCrashed) as caught:
            self.call().complete(provider_world(Broken), lambda sent: testing.json(200, {}), host)
        self.assertEqual(len(host.logs), 1)
        level, message = host.logs[0]
        self.assertEqual(level, "error")
        self.assertEqual(caught.exception.line, message)
        first, *frames = message.splitlines()
        self.assertEqual(first, "plugin raised KeyError: 'model'")
        # The plugin's own frames, innermost last; not the SDK's, nor a second traceback.
        self.assertIn("in request", frames[0])
        self.assertIn("in lookup", frames[-2])
        self.assertEqual(frames[-1].strip(), 'return table["model"]')
        self.assertNotIn("gateway_plugin", message)
        self.assertNotIn("Traceback", message)

    def test_an_exception_inside_the_sdk_keeps_the_plugins_frames(self):
        not_json = lambda sent: Response.from_chunks(200, [], [b"not json"])  # noqa: E731
        with self.assertRaises(testing.PluginCrashed) as caught:
            self.call().complete(self.world, not_json)
        message = caught.exception.line
        self.assertTrue(message.startswith("plugin raised json.decoder.JSONDecodeError: "), message)
        self.assertIn("in body", message)

    def test_the_caller_leaving_ends_a_stream(self):
        class Streamer(Echo):
            def event(self, event, answer):
                answer.text(0, "piece")

        run = self.call().stream(
            provider_world(Streamer), lambda sent: testing.sse(['{"text":"a"}', "more", "[DONE]"]),
            caller_leaves_after=1,
        )
        self.assertEqual(run.error.to_wit(), types.ProviderError_Failed("the caller disconnected"))
        self.assertEqual(run.streamed_text(), "piece")


def iter_body(chunks):
    body = mock.MagicMock()
    body.read.side_effect = list(chunks) + [None]
    return body


if __name__ == "__main__":
    unittest.main()


class OutputTest(unittest.TestCase):
    """The gateway's output limit: what it reserved is all a body may ask for."""

    def setUp(self):
        from gateway_plugin.provider import OutputFields

        self.fields = OutputFields(
            [("max_completion_tokens",), ("generationConfig", "maxOutputTokens")], [("n",)]
        )

    def check(self, max_tokens, body, choices=1, fields="default"):
        from gateway_plugin.provider import check_output

        fields = self.fields if fields == "default" else fields
        check_output(types.OutputLimit(max_tokens, choices), fields, json.dumps(body).encode())

    def refused(self, *args, **kwargs):
        with self.assertRaises(ProviderError) as caught:
            self.check(*args, **kwargs)
        self.assertEqual(caught.exception.kind, "failed")
        return str(caught.exception)

    def test_within_the_limit_passes(self):
        self.check(50, {"max_completion_tokens": 50})
        self.check(50, {"generationConfig": {"maxOutputTokens": 10}, "n": 2}, choices=2)
        self.check(None, {"n": 9})
        self.check(None, {}, fields=None)

    def test_over_the_limit_or_unbounded_is_refused(self):
        self.assertIn("max_completion_tokens = 51", self.refused(50, {"max_completion_tokens": 51}))
        self.refused(50, {"generationConfig": {"maxOutputTokens": 500}, "max_completion_tokens": 5})
        self.refused(50, {"max_completion_tokens": 50, "n": 2})
        self.refused(50, {"max_completion_tokens": "50"})
        self.refused(50, {"temperature": 0})
        self.assertIn("names no OUTPUT", self.refused(50, {"max_tokens": 1}, fields=None))

    def test_a_repeated_key_is_held_to_the_limit_each_time(self):
        from gateway_plugin.provider import check_output

        body = b'{"max_completion_tokens": 5, "max_completion_tokens": 500}'
        with self.assertRaises(ProviderError):
            check_output(types.OutputLimit(50, 1), self.fields, body)


class MintedSecretsTest(unittest.TestCase):
    """What `kv.get_or_refresh` mints is declared secret for its lifetime and a grace, once."""

    def test_a_minted_value_is_declared_secret_once_and_kept(self):
        from gateway_plugin import kv
        from wit_world.imports import kv as host

        entries, secrets = {}, []
        with mock.patch.object(host, "get", side_effect=entries.get), mock.patch.object(
            host, "set", side_effect=lambda key, value, ttl: entries.__setitem__(key, value)
        ), mock.patch.object(
            host, "secret", side_effect=lambda value, ttl: secrets.append((value, ttl)), create=True
        ):
            minted = []
            for _ in range(3):
                token = kv.get_or_refresh("t", lambda: minted.append(1) or ("ya29.minted", 60_000))
                self.assertEqual(token, b"ya29.minted")
            self.assertEqual(len(minted), 1)
            self.assertEqual(secrets, [("ya29.minted", 60_000 + kv.SECRET_GRACE_MS)])
            # Used once (no lifetime): declared until displaced, not kept.
            self.assertEqual(kv.get_or_refresh("once", lambda: ("once-token", 0)), b"once-token")
            self.assertNotIn("once", entries)
            self.assertEqual(secrets[-1], ("once-token", 0))
