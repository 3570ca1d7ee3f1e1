"""`gateway_plugin.testing`, the fake host plugin authors test with: what it records, what it
refuses as the gateway does, and its `kv` and `log`."""

import unittest

from wit_world.imports import guard_types, http, tool_types, types

from gateway_plugin import kv, log, testing
from gateway_plugin.guard import Guard, allow, deny, guard_world, rewrite, texts
from gateway_plugin.provider import Call, HttpProvider, OutputFields, Request, provider_world
from gateway_plugin.tool import ToolContext, ToolFailure, Tools, tool, tool_world


class Chat(HttpProvider):
    """Posts the chat to `/chat`; keeps a token in kv; reads `{"t": text, "done": bool}`."""

    NAME = "chat"
    OUTPUT = OutputFields([("max_tokens",)])

    def request(self, call: Call, stream: bool) -> Request:
        token = kv.get_or_refresh("token", lambda: ("minted-token-1", 60_000)).decode()
        log.info(f"calling {call.model}")
        log.debug("debug line")
        body = {"model": call.model, "messages": call.messages(), **call.params("model")}
        if call.output.max_tokens is not None:
            body["max_tokens"] = call.output.max_tokens
        url = call.settings(path="/chat")["path"]
        return Request.post(call.base_url() + url).bearer(token).streaming(stream).json(body)

    def body(self, data: bytes, answer) -> None:
        import json

        value = json.loads(data)
        answer.text(0, value["t"])
        if value.get("done"):
            answer.finish_reason(0, "stop")
            answer.complete()


World = provider_world(Chat)


class CallTest(unittest.TestCase):
    def test_records_every_request_as_sent(self):
        call = (
            testing.Call.chat("m", [testing.message("system", "be brief"), testing.message("user", "hi")])
            .base_url("https://API.example.com:443/")
            .params({"temperature": 0.5})
            .output(20)
            .settings({"path": "/v2/chat"})
        )
        run = call.complete(World, lambda sent: testing.json(200, {"t": "yo", "done": True}))
        self.assertEqual(run.result.choices[0].text, "yo")
        (sent,) = run.sent
        self.assertEqual((sent.method, sent.url), ("POST", "https://API.example.com:443/v2/chat"))
        self.assertEqual(sent.header_value("Authorization"), "Bearer minted-token-1")
        self.assertEqual(
            sent.json(),
            {
                "model": "m",
                "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
                "temperature": 0.5,
                "max_tokens": 20,
            },
        )

    def test_another_host_is_refused_before_the_upstream(self):
        seen = []
        run = testing.Call.text("m", "hi").base_url("http://upstream.test").settings(
            {"path": "@evil.test/x"}
        ).complete(World, lambda sent: seen.append(sent) or testing.json(200, {}))
        self.assertEqual(seen, [])
        self.assertEqual(len(run.sent), 1)
        self.assertEqual(run.error.kind, "failed")
        self.assertIn("does not allow requests to evil.test", run.error.message)

    def test_streams_sse_and_ndjson_and_keeps_the_chunks(self):
        events = [{"t": "Hel"}, {"t": "lo"}, {"t": "", "done": True}]
        for response in (testing.sse([*events, "[DONE]"]), testing.ndjson(events)):
            run = testing.Call.text("m", "hi").stream(World, lambda sent, r=response: r)
            self.assertEqual(run.result.choices[0].text, "Hello")
            self.assertEqual(run.streamed_text(), "Hello")
            self.assertEqual(len(run.chunks), 2)
            self.assertEqual(run.sent[0].header_value("accept"), "text/event-stream")

    def test_an_upstream_failure_is_the_hosts_error(self):
        run = testing.Call.text("m", "hi").complete(World, lambda sent: http.HttpError_Timeout("10 s"))
        self.assertEqual(run.error.kind, "timeout")

    def test_kv_and_log_are_the_hosts(self):
        host = testing.Host(log_level="info")
        for _ in range(2):
            testing.Call.text("m", "hi").complete(
                World, lambda sent: testing.json(200, {"t": "a", "done": True}), host
            )
        self.assertEqual(host.kv, {"token": b"minted-token-1"})
        self.assertEqual(host.secrets, ["minted-token-1"])
        self.assertEqual(host.lines("info"), ["calling m", "calling m"])
        # Below the level: not `enabled`, but a line written anyway is kept.
        self.assertEqual(host.lines("debug"), ["debug line", "debug line"])
        run = testing.Call.text("m", "hi").complete(World, lambda sent: testing.json(500, {}), host)
        self.assertEqual(run.logs, [("info", "calling m"), ("debug", "debug line")])
        self.assertEqual((run.error.kind, run.error.status), ("upstream", 500))

    def test_the_imports_are_restored_after_a_run(self):
        send = http.send
        testing.Call.text("m", "hi").complete(World, lambda sent: testing.json(200, {"t": "", "done": True}))
        self.assertIs(http.send, send)


class Speaker(HttpProvider):
    """Posts the text to `/audio/speech` and streams the audio's bytes to the caller."""

    NAME = "speaker"

    def speak(self, call: Call, sink) -> types.Speech:
        body = {
            "model": call.model,
            "input": call.request.input,
            "voice": call.request.voice,
            "response_format": call.request.format,
            **call.params("model", "input", "voice", "response_format"),
        }
        request = Request.post(f"{call.base_url()}/audio/speech").api_key(call.api_key)
        response = request.json(body).send().error_for_status()
        for piece in response.chunks():
            sink.send_audio(piece)
        return types.Speech(call.model, None)


Speaking = provider_world(Speaker)
AUDIO = [b"ID3\x04", b"\xff\xfb\x90", b"\x00"]


def audio(sent):
    return testing.Response.from_chunks(200, [("content-type", "audio/mpeg")], AUDIO)


class SpeakTest(unittest.TestCase):
    def test_records_the_audio_as_the_caller_got_it(self):
        call = (
            testing.Call.speech("tts-1", "Hello there", voice="coral", format="opus")
            .base_url("https://api.example.com/v1")
            .api_key("sk-1")
            .params({"speed": 1.5})
        )
        self.assertEqual(
            call.speech_request,
            types.SpeechRequest(call.route, "tts-1", "Hello there", "coral", "opus", '{"speed": 1.5}'),
        )
        run = call.speak(Speaking, audio)
        self.assertEqual(run.result, types.Speech("tts-1", None))
        self.assertEqual(run.audio, AUDIO)
        self.assertEqual(run.streamed_audio(), b"".join(AUDIO))
        self.assertEqual(run.chunks, [])
        (sent,) = run.sent
        self.assertEqual((sent.method, sent.url), ("POST", "https://api.example.com/v1/audio/speech"))
        self.assertEqual(
            sent.json(),
            {"model": "tts-1", "input": "Hello there", "voice": "coral", "response_format": "opus", "speed": 1.5},
        )

    def test_the_defaults_an_error_and_the_caller_leaving(self):
        self.assertEqual(testing.Call.speech("tts-1", "hi").speech_request.voice, "alloy")
        self.assertEqual(testing.Call.speech("tts-1", "hi").speech_request.format, "mp3")
        run = testing.Call.speech("tts-1", "hi").speak(Speaking, audio, caller_leaves_after=1)
        self.assertEqual((run.error.kind, run.error.message), ("failed", "the caller disconnected"))
        self.assertEqual(run.audio, AUDIO[:1])
        bad = {"error": {"message": "no such voice"}}
        run = testing.Call.speech("tts-1", "hi", voice="nobody").speak(Speaking, lambda sent: testing.json(400, bad))
        self.assertEqual((run.error.kind, run.error.status, run.error.message), ("upstream", 400, "no such voice"))
        self.assertEqual(run.audio, [])
        # A provider that does not speak: refused, and the host's sink restored after the run.
        from wit_world.imports import sink

        send_audio = sink.send_audio
        run = testing.Call.speech("m", "hi").speak(World, audio)
        self.assertEqual(run.error.to_wit(), types.ProviderError_InvalidRequest("chat does not support speech"))
        self.assertEqual(run.sent, [])
        self.assertIs(sink.send_audio, send_audio)


class Words(Guard):
    def check_request(self, request):
        words = request.settings(words=["secret"])["words"]
        found = [t for t in texts(request) if any(w in t for w in words)]
        if found:
            return deny("a listed word")
        return allow()

    def check_response(self, request, answer):
        return rewrite([t.upper() for t in texts(answer)], {"upper": len(answer.choices)})


class CheckTest(unittest.TestCase):
    def test_request_and_response_checks(self):
        world = guard_world(Words)
        self.assertTrue(testing.Check.text("m", "hello").request(world).allowed)
        checked = testing.Check.chat("m", [testing.message("user", "my secret")]).request(world)
        self.assertEqual(checked.denied, "a listed word")
        self.assertTrue(testing.Check.embedding("m", ["x"]).settings({"words": ["y"]}).request(world).allowed)
        checked = testing.Check.text("m", "q").response(world, ["a", "b"])
        self.assertEqual((checked.rewritten, checked.changes), (["A", "B"], {"upper": 2}))
        self.assertIsInstance(checked.verdict, guard_types.AnswerVerdict_Rewrite)


ID = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}


class Items(Tools):
    """Gets `{base}/items/{id}` with the server's token; `base` a setting."""

    @tool(input_schema=ID, annotations={"readOnlyHint": True})
    def get(self, args, context: ToolContext):
        """Gets an item."""
        log.info(f"getting {args['id']}")
        base = context.settings(base="http://upstream.test")["base"]
        request = Request.get(f"{base}/items/{args['id']}")
        token = context.secret("token")
        if token:
            request.bearer(token)
        response = request.send()
        if response.status == 404:
            raise ToolFailure(f"no item {args['id']}")
        return response.error_for_status().read().decode()


Tool = tool_world(Items)


class ToolCallTest(unittest.TestCase):
    def test_a_call_reaches_an_allowed_host_with_the_servers_context(self):
        host = testing.Host()
        call = (
            testing.ToolCall.server("items")
            .settings({"base": "https://API.example.com/v1"})
            .secret("token", "t-1")
            .allow_hosts("api.example.com")
        )
        run = call.call_tool(Tool, "get", {"id": "a1"}, lambda sent: testing.json(200, {"id": "a1"}), host)
        self.assertEqual(run.result.content, [tool_types.Content_Text('{"id": "a1"}')])
        self.assertFalse(run.result.is_error)
        self.assertIsNone(run.error)
        (sent,) = run.sent
        self.assertEqual((sent.method, sent.url), ("GET", "https://API.example.com/v1/items/a1"))
        self.assertEqual(sent.header_value("authorization"), "Bearer t-1")
        self.assertEqual(run.logs, [("info", "getting a1")])
        # A missing item: the tool's own is-error result, not a tool-error.
        run = call.call_tool(Tool, "get", '{"id": "b2"}', lambda sent: testing.json(404, {}), host)
        self.assertTrue(run.result.is_error)
        self.assertEqual(run.result.content, [tool_types.Content_Text("no item b2")])
        self.assertEqual(host.lines("info"), ["getting a1", "getting b2"])

    def test_a_host_not_allowed_is_refused_before_the_upstream(self):
        seen = []

        def upstream(sent):
            seen.append(sent)
            return testing.json(200, {})

        for allowed, url in (
            ((), "https://api.example.com"),
            (("api.example.com",), "http://api.example.com"),  # port 80: not 443
            (("api.example.com:8443",), "https://api.example.com"),
            (("https://api.example.com",), "http://api.example.com:443"),
            (("api.example.com",), "https://api.example.com.evil.test"),
        ):
            run = (
                testing.ToolCall.server()
                .settings({"base": url})
                .allow_hosts(*allowed)
                .call_tool(Tool, "get", {"id": "a1"}, upstream)
            )
            self.assertEqual(len(run.sent), 1, (allowed, url))
            self.assertEqual(run.error.kind, "failed", (allowed, url))
            self.assertIn("does not allow requests to", run.error.message)
            self.assertIsInstance(run.error.raw, tool_types.ToolError_Failed)
            with self.assertRaises(testing.ToolError):
                run.result
        self.assertEqual(seen, [])
        # Either scheme for a bare host:port.
        call = testing.ToolCall.server().allow_hosts("127.0.0.1:8080").settings(
            {"base": "http://127.0.0.1:8080"}
        )
        self.assertEqual(call.call_tool(Tool, "get", {"id": "a"}, upstream).result.is_error, False)
        with self.assertRaises(ValueError):
            testing.ToolCall.server().allow_hosts("ftp://files.example.com")

    def test_tool_errors_are_the_runs_error(self):
        call = testing.ToolCall.server().allow_hosts("upstream.test:80")
        down = {"error": {"message": "down for maintenance"}}
        run = call.call_tool(Tool, "get", {"id": "a1"}, lambda sent: testing.json(503, down))
        self.assertEqual((run.error.kind, run.value), ("failed", None))
        self.assertEqual(run.error.message, "down for maintenance")
        run = call.call_tool(Tool, "get", {})
        self.assertEqual(run.error.kind, "invalid_arguments")
        self.assertEqual(run.sent, [])
        run = call.call_tool(Tool, "put", {"id": "a1"})
        self.assertEqual((run.error.kind, run.error.message), ("unknown_tool", "put"))
        self.assertIsInstance(run.error.raw, tool_types.ToolError_UnknownTool)

    def test_a_request_without_an_upstream_fails_the_test(self):
        call = testing.ToolCall.server().allow_hosts("upstream.test:80")
        with self.assertRaisesRegex(AssertionError, "no upstream, but the plugin sent GET"):
            call.call_tool(Tool, "get", {"id": "a1"})

    def test_lists_the_tools(self):
        run = testing.ToolCall.server().list_tools(Tool)
        (listed,) = run.result
        self.assertEqual((listed.name, listed.description), ("get", "Gets an item."))
        self.assertEqual(listed.input_schema, '{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}')
        self.assertEqual((run.error, run.sent), (None, []))


if __name__ == "__main__":
    unittest.main()
