"""`gateway_plugin.testing`, the fake host plugin authors test with: what it records, what it
refuses as the gateway does, and its `kv` and `log`."""

import unittest

from wit_world.imports import guard_types, http, types

from gateway_plugin import kv, log, testing
from gateway_plugin.guard import Guard, allow, deny, guard_world, rewrite, texts
from gateway_plugin.provider import Call, HttpProvider, OutputFields, Request, provider_world


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


if __name__ == "__main__":
    unittest.main()
