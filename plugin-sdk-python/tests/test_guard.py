"""The guard side of the SDK: texts in and out of every kind of input, verdicts per stage."""

import unittest
from unittest import mock

import fake_host  # noqa: F401 (the log, natively)
from wit_world.imports import guard_types, types

from gateway_plugin import crash
from gateway_plugin.guard import Guard, allow, deny, guard_world, rewrite, texts


class Aborted(Exception):
    """Stands for the trap `crash.end` ends the instance with."""


def message(role, *parts):
    return types.Message(role, list(parts), None, None, [], None, False)


def checked(input_, settings="{}"):
    return guard_types.CheckedRequest("g1", settings, "r", "m", input_, [], "{}")


CHAT = guard_types.Input_Prompt(
    types.Prompt_Chat(
        [
            message(types.Role.SYSTEM, types.Part_Text("be nice")),
            message(
                types.Role.USER,
                types.Part_Text("my key is sk-1"),
                types.Part_Image(types.Image(types.Source_Url("https://x/i.png"), None, None)),
                types.Part_Text("thanks"),
            ),
        ]
    )
)


def answer(*texts_):
    choices = [types.Choice(i, t, [], None, None, [], None) for i, t in enumerate(texts_)]
    return types.Completion("m", choices, None)


class Redact(Guard):
    NAME = "redact"

    def check_request(self, request):
        found = [t for t in request.texts() if "sk-" in t]
        if request.settings(mode="rewrite")["mode"] == "deny" and found:
            return deny("rule `keys` matched")
        if not found:
            return allow()
        return rewrite([t.replace("sk-1", "[key]") for t in request.texts()], {"key": len(found)})

    def check_response(self, request, answer_):
        if any("sk-" in t for t in texts(answer_)):
            return rewrite([t.replace("sk-1", "[key]") for t in texts(answer_)], {"key": 1})
        return allow()


class GuardTest(unittest.TestCase):
    def test_texts_of_every_input(self):
        self.assertEqual(texts(CHAT), ["be nice", "my key is sk-1", "thanks"])
        self.assertEqual(texts(guard_types.Input_Prompt(types.Prompt_Text("t"))), ["t"])
        self.assertEqual(texts(guard_types.Input_Embedding(["a", "b"])), ["a", "b"])
        self.assertEqual(texts(answer("x", "y")), ["x", "y"])

    def test_defaults_allow(self):
        world = guard_world(Guard)()
        self.assertEqual(world.check_request(checked(CHAT)), guard_types.RequestVerdict_Allow())
        self.assertEqual(world.check_response(checked(CHAT), answer("a")), guard_types.AnswerVerdict_Allow())
        self.assertEqual(world.info(), types.PluginInfo("python-guard", "0.1.0", []))

    def test_rewrite_keeps_the_inputs_shape(self):
        verdict = guard_world(Redact)().check_request(checked(CHAT))
        self.assertIsInstance(verdict, guard_types.RequestVerdict_Rewrite)
        rewritten = verdict.value
        self.assertEqual(texts(rewritten.input), ["be nice", "my key is [key]", "thanks"])
        self.assertEqual(rewritten.changes, [guard_types.Change("key", 1)])
        user = rewritten.input.value.value[1]
        self.assertIsInstance(user.parts[1], types.Part_Image)
        self.assertEqual(user.role, types.Role.USER)
        embedding = guard_world(Redact)().check_request(checked(guard_types.Input_Embedding(["sk-1", "x"])))
        self.assertEqual(embedding.value.input, guard_types.Input_Embedding(["[key]", "x"]))

    def test_deny_and_answer_rewrite(self):
        world = guard_world(Redact)()
        verdict = world.check_request(checked(CHAT, '{"mode": "deny"}'))
        self.assertEqual(verdict, guard_types.RequestVerdict_Deny("rule `keys` matched"))
        verdict = world.check_response(checked(CHAT), answer("ok", "sk-1!"))
        self.assertEqual(verdict.value.texts, ["ok", "[key]!"])

    def test_a_failing_guard_is_logged_once_and_ends_the_instance(self):
        with mock.patch("wit_world.imports.log.log") as log:
            with mock.patch.object(crash, "_abort", side_effect=Aborted) as abort:
                with self.assertRaises(Aborted):
                    guard_world(Redact)().check_request(checked(CHAT, '{"mood": 1}'))
        abort.assert_called_once()
        log.assert_called_once()
        self.assertTrue(log.call_args.args[1].startswith("guard raised "), log.call_args)
        self.assertIn("unknown setting `mood`", log.call_args.args[1])

        class Wrong(Guard):
            def check_response(self, request, answer_):
                return rewrite(["only one"])

        with mock.patch("wit_world.imports.log.log") as log:
            with mock.patch.object(crash, "_abort", side_effect=Aborted):
                with self.assertRaises(Aborted):
                    guard_world(Wrong)().check_response(checked(CHAT), answer("a", "b"))
        self.assertIn("ValueError: an answer rewrite has 1 texts", log.call_args.args[1])

    def test_a_check_without_a_verdict_fails_closed(self):
        class Forgetful(Guard):
            def check_request(self, request):
                if "secret" in texts(request):
                    return deny("a secret")  # and nothing returned otherwise

        with mock.patch("wit_world.imports.log.log") as log:
            with mock.patch.object(crash, "_abort", side_effect=Aborted):
                with self.assertRaises(Aborted):
                    guard_world(Forgetful)().check_request(checked(CHAT))
        self.assertIn("TypeError: check_request returned NoneType", log.call_args.args[1])


if __name__ == "__main__":
    unittest.main()
