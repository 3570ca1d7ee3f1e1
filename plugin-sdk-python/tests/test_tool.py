"""The tool side of the SDK: declarations as the gateway lists them, arguments checked, what
handlers return or raise as results and errors."""

import json
import unittest
from unittest import mock

from componentize_py_types import Err
import fake_host  # noqa: F401 (the log, natively)
from wit_world.imports import http, tool_types, types

from gateway_plugin import crash
from gateway_plugin.http import Request
from gateway_plugin.tool import (
    InvalidArguments,
    ToolFailure,
    Tools,
    image,
    resource,
    resource_link,
    result,
    tool,
    tool_world,
)


class Aborted(Exception):
    """Stands for the trap `crash.end` ends the instance with."""


WORD = {
    "type": "object",
    "properties": {"word": {"type": "string"}},
    "required": ["word"],
}
COUNT = {"type": "object", "properties": {"letters": {"type": "integer"}}}


class Words(Tools):
    NAME = "words"
    VERSION = "1.2.3"

    @tool(input_schema=WORD, title="Shout", annotations={"readOnlyHint": True})
    def shout(self, args, context):
        """Upper-cases a word.

        Loudly."""
        if args["word"] == "":
            raise ToolFailure("give me a word")
        suffix = context.settings(suffix="!")["suffix"]
        return args["word"].upper() + suffix

    @tool("count.letters", description="Counts letters.", input_schema=WORD, output_schema=COUNT)
    def count(self, args, context):
        if not isinstance(args["word"], str):
            raise InvalidArguments("word must be a string")
        return {"letters": len(args["word"])}

    @tool()
    def media(self, args, context):
        return [
            "see",
            image(b"\x89PNG", "image/png"),
            resource_link("file:///a", "a", media_type="text/plain"),
            resource("file:///b", b"\x00"),
        ]

    @tool()
    def secret(self, args, context):
        return result(context.secret("token") or "none", structured={"server": context.server})

    @tool()
    def broken(self, args, context):
        return {}["missing"]


def context(settings="{}"):
    return tool_types.ToolContext("srv", settings, [("token", "t0k")])


def call(name, arguments, settings="{}"):
    return tool_world(Words)().call_tool(name, arguments, context(settings))


def refused(name, arguments, settings="{}"):
    try:
        call(name, arguments, settings)
    except Err as e:
        return e.value
    raise AssertionError("the call was not refused")


class ToolTest(unittest.TestCase):
    def test_info_and_listing(self):
        world = tool_world(Words)()
        self.assertEqual(world.info(), types.PluginInfo("words", "1.2.3", []))
        tools = {t.name: t for t in world.list_tools(context())}
        self.assertEqual(list(tools), ["shout", "count.letters", "media", "secret", "broken"])
        shout = tools["shout"]
        self.assertEqual(
            (shout.title, shout.description), ("Shout", "Upper-cases a word.\n\nLoudly.")
        )
        self.assertEqual(json.loads(shout.input_schema), WORD)
        self.assertIsNone(shout.output_schema)
        self.assertEqual(json.loads(shout.annotations), {"readOnlyHint": True})
        count = tools["count.letters"]
        self.assertEqual(count.description, "Counts letters.")
        self.assertEqual(json.loads(count.output_schema), COUNT)
        no_arguments = {"type": "object", "properties": {}}
        self.assertEqual(json.loads(tools["media"].input_schema), no_arguments)

    def test_a_string_is_one_text_block(self):
        answer = call("shout", '{"word": "hey"}', '{"suffix": "?"}')
        expected = tool_types.ToolResult([tool_types.Content_Text("HEY?")], None, False)
        self.assertEqual(answer, expected)

    def test_a_dict_is_structured_content_and_its_json(self):
        answer = call("count.letters", '{"word": "héllo"}')
        self.assertEqual(json.loads(answer.structured_content), {"letters": 5})
        self.assertEqual(answer.content, [tool_types.Content_Text(answer.structured_content)])
        self.assertFalse(answer.is_error)

    def test_content_blocks_and_results(self):
        blocks = call("media", "{}").content
        self.assertEqual(blocks[0], tool_types.Content_Text("see"))
        self.assertEqual(blocks[1].value, tool_types.Media(b"\x89PNG", "image/png"))
        self.assertEqual(blocks[2].value.media_type, "text/plain")
        self.assertEqual(blocks[3].value.body, tool_types.ResourceBody_Blob(b"\x00"))
        answer = call("secret", "")
        self.assertEqual(answer.content, [tool_types.Content_Text("t0k")])
        self.assertEqual(json.loads(answer.structured_content), {"server": "srv"})

    def test_a_tool_failure_is_an_error_result(self):
        answer = call("shout", '{"word": ""}')
        self.assertEqual(answer.content, [tool_types.Content_Text("give me a word")])
        self.assertTrue(answer.is_error)

    def test_arguments_are_checked(self):
        invalid = tool_types.ToolError_InvalidArguments
        self.assertEqual(refused("count.letters", '{"word": 3}'), invalid("word must be a string"))
        self.assertEqual(
            refused("shout", '{"words": "x"}'), invalid("missing required argument(s): word")
        )
        self.assertEqual(
            refused("shout", '["x"]'), invalid("the arguments must be a JSON object")
        )
        self.assertIsInstance(refused("shout", "{"), invalid)

    def test_unknown_tools_and_settings(self):
        self.assertEqual(refused("whisper", "{}"), tool_types.ToolError_UnknownTool("whisper"))
        failed = refused("shout", '{"word": "x"}', '{"sufix": "?"}')
        self.assertIsInstance(failed, tool_types.ToolError_Failed)
        self.assertIn("server `srv`: unknown setting `sufix`", failed.value)

    def test_an_uncaught_exception_is_logged_once_and_traps(self):
        with mock.patch("wit_world.imports.log.log") as log:
            with mock.patch.object(crash, "_abort", side_effect=Aborted) as abort:
                with self.assertRaises(Aborted):
                    call("broken", "{}")
        abort.assert_called_once()
        log.assert_called_once()
        self.assertTrue(log.call_args.args[1].startswith("tool raised KeyError"), log.call_args)
        self.assertIn("in broken", log.call_args.args[1])

    def test_declarations_are_checked(self):
        def handler(self, args, context):
            return ""

        with self.assertRaises(ValueError):
            tool("two words")(handler)
        with self.assertRaises(ValueError):
            tool(input_schema={"type": "string"})(handler)

        class Twice(Words):
            @tool("shout")
            def again(self, args, context):
                return ""

        with mock.patch.object(crash, "_abort", side_effect=Aborted), self.assertRaises(Aborted):
            tool_world(Twice)().list_tools(context())

    def test_http_failures_fail_the_call(self):
        class Down(Tools):
            @tool()
            def fetch(self, args, context):
                return Request.get("http://up/").send().read().decode()

        forbidden = Err(http.HttpError_ForbiddenHost("up:80"))
        with mock.patch.object(http, "send", side_effect=forbidden):
            with self.assertRaises(Err) as caught:
                tool_world(Down)().call_tool("fetch", "{}", context())
        self.assertIsInstance(caught.exception.value, tool_types.ToolError_Failed)
        self.assertIn("a tool server's allowed_hosts", caught.exception.value.value)


if __name__ == "__main__":
    unittest.main()
