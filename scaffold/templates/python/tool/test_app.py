"""`python -m unittest`: the tool natively, without a gateway, its HTTP requests answered by
each test's scripted upstream."""

import unittest
from json import loads

from gateway_plugin.testing import ToolCall, json

import app

BASE = "https://api.example.com"


def server():
    # As the gateway's config would set it up: the API's host allowed, its URL in the settings.
    return ToolCall.server("items").settings({"base_url": BASE}).allow_hosts("api.example.com")


class ToolTest(unittest.TestCase):
    def test_a_found_item_is_the_structured_result(self):
        item = {"id": "a-1", "name": "Anvil"}
        run = server().call_tool(
            app.WitWorld, "lookup", {"id": "a-1"}, lambda request: json(200, item)
        )
        self.assertFalse(run.result.is_error)
        self.assertEqual(loads(run.result.structured_content), item)
        self.assertEqual(loads(run.result.content[0].value), item)

        (request,) = run.sent
        self.assertEqual((request.method, request.url), ("GET", f"{BASE}/items/a-1"))

    def test_a_missing_item_is_an_error_result_a_failing_api_fails_the_call(self):
        missing = server().call_tool(
            app.WitWorld, "lookup", {"id": "b-2"}, lambda request: json(404, {"error": "not found"})
        )
        self.assertTrue(missing.result.is_error)
        self.assertEqual([block.value for block in missing.result.content], ["no item b-2"])

        broken = server().call_tool(
            app.WitWorld, "lookup", {"id": "b-2"}, lambda request: json(500, {"error": "down"})
        )
        self.assertEqual(broken.error.kind, "failed")
        self.assertIn("500", broken.error.message)

    def test_a_bad_id_is_an_error_result_and_nothing_is_sent(self):
        for bad in ["", "a/../b", "x" * 65]:
            run = server().call_tool(app.WitWorld, "lookup", {"id": bad})
            self.assertTrue(run.result.is_error, bad)
            texts = [block.value for block in run.result.content]
            self.assertEqual(texts, ["id is 1 to 64 letters, digits, - or _"])
            self.assertEqual(run.sent, [])


if __name__ == "__main__":
    unittest.main()
