"""The example provider's unit tests, natively with the SDK's fake host (no gateway):
`python -m unittest` in this directory, with `gateway-plugin-sdk` installed."""

import unittest

from gateway_plugin.testing import Call, json, sse

import app

ANSWER = {
    "model": "gpt-4o-mini-2024",
    "choices": [{"index": 0, "message": {"content": "Hi!"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}


class AppTest(unittest.TestCase):
    def test_chat_completion(self):
        run = (
            Call.text("gpt-4o-mini", "hello")
            .base_url("https://api.openai.com/v1")
            .api_key("sk-test")
            .params({"temperature": 0.2, "model": "not this one"})
            .output(50)
            .complete(app.WitWorld, lambda request: json(200, ANSWER))
        )
        completion = run.result
        self.assertEqual(completion.choices[0].text, "Hi!")
        self.assertEqual(completion.model, "gpt-4o-mini-2024")
        self.assertEqual(completion.usage.total_tokens, 5)
        (sent,) = run.sent
        self.assertEqual(sent.url, "https://api.openai.com/v1/chat/completions")
        self.assertEqual(sent.header_value("authorization"), "Bearer sk-test")
        body = sent.json()
        self.assertEqual(body["model"], "gpt-4o-mini")
        self.assertEqual(body["messages"], [{"role": "user", "content": "hello"}])
        self.assertEqual((body["temperature"], body["max_tokens"], body["n"]), (0.2, 50, 1))

    def test_stream(self):
        chunks = [
            {"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
            {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
            "[DONE]",
        ]
        run = Call.text("gpt-4o-mini", "hi").stream(app.WitWorld, lambda request: sse(chunks))
        self.assertEqual(run.streamed_text(), "Hello")
        self.assertEqual(run.result.usage.total_tokens, 3)
        self.assertEqual(run.sent[0].json()["stream_options"], {"include_usage": True})

    def test_legacy_completions_setting(self):
        answer = {"choices": [{"index": 0, "text": "ok", "finish_reason": "length"}]}
        run = (
            Call.text("gpt-3.5-turbo-instruct", "say ok")
            .settings({"legacy_completions": True})
            .complete(app.WitWorld, lambda request: json(200, answer))
        )
        self.assertEqual(run.result.choices[0].text, "ok")
        self.assertEqual(run.sent[0].url, "http://upstream.test/completions")
        self.assertEqual(run.sent[0].json()["prompt"], "say ok")

    def test_upstream_errors_keep_their_status(self):
        error = {"error": {"message": "Rate limit reached"}}
        run = Call.text("gpt-4o-mini", "hi").complete(
            app.WitWorld, lambda request: json(429, error, [("retry-after", "3")])
        )
        self.assertEqual((run.error.kind, run.error.status), ("upstream", 429))
        self.assertEqual((run.error.message, run.error.retry_after), ("Rate limit reached", 3))


if __name__ == "__main__":
    unittest.main()
