"""`python -m unittest`: the plugin natively, without a gateway. The SDK's fake host passes what
the gateway would and answers the plugin's requests with each test's scripted upstream."""

import unittest

from gateway_plugin import finish_reason
from gateway_plugin.testing import Call, json, message, ndjson

import app

BASE = "https://api.example.com/v1"


class ProviderTest(unittest.TestCase):
    def test_a_whole_answer(self):
        tokens = {"input_tokens": 5, "output_tokens": 2}
        answer = {"text": "Hi!", "finish_reason": "stop", "usage": tokens}
        run = (
            Call.chat("example-model", [message("system", "Be brief."), message("user", "Hello")])
            .base_url(BASE)
            .api_key("sk-test")
            .output(100)
            .complete(app.WitWorld, lambda request: json(200, answer))
        )
        choice = run.result.choices[0]
        self.assertEqual((choice.text, choice.finish_reason), ("Hi!", finish_reason("stop")))
        usage = run.result.usage
        self.assertEqual((usage.prompt_tokens, usage.completion_tokens), (5, 2))
        self.assertEqual(usage.total_tokens, 7)

        (request,) = run.sent
        self.assertEqual(request.url, f"{BASE}/generate")
        self.assertEqual(request.header_value("authorization"), "Bearer sk-test")
        self.assertEqual(
            request.json(),
            {
                "model": "example-model",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hello"},
                ],
                "stream": False,
                "max_tokens": 100,
            },
        )

    def test_a_stream(self):
        lines = [
            {"text": "Hel"},
            {"text": "lo"},
            {"finish_reason": "stop", "usage": {"input_tokens": 3, "output_tokens": 2}},
        ]
        run = Call.text("example-model", "Say hello").base_url(BASE).stream(
            app.WitWorld, lambda request: ndjson(lines)
        )
        self.assertEqual(run.streamed_text(), "Hello")
        self.assertEqual(run.chunks[-1].usage.total_tokens, 5)
        self.assertEqual(run.result.choices[0].text, "Hello")

        (request,) = run.sent
        self.assertIsNone(request.header_value("authorization"), "no key, no header")
        self.assertEqual(
            request.json(),
            {
                "model": "example-model",
                "messages": [{"role": "user", "content": "Say hello"}],
                "stream": True,
            },
        )

    def test_an_upstream_error_keeps_its_status(self):
        run = Call.text("example-model", "Hello").base_url(BASE).complete(
            app.WitWorld, lambda request: json(429, {"error": "slow down"})
        )
        self.assertEqual((run.error.kind, run.error.status), ("upstream", 429))


if __name__ == "__main__":
    unittest.main()
