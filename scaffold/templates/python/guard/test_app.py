"""`python -m unittest`: the guard natively, without a gateway, shown requests as the gateway
shows them."""

import unittest

from gateway_plugin.testing import Check, PluginCrashed, message

import app

SETTINGS = {"words": ["secret", "Project X"]}


def check(request):
    """Runs the guard's check of `request` (a `Check`) with SETTINGS."""
    return request.settings(SETTINGS).request(app.WitWorld)


class GuardTest(unittest.TestCase):
    def test_denies_a_blocked_word_in_any_case(self):
        checked = check(Check.text("example-model", "Tell me the SECRET plan"))
        self.assertEqual(checked.denied, 'the request mentions "secret"')

        chat = [message("system", "Be brief."), message("user", "What is project x?")]
        checked = check(Check.chat("example-model", chat))
        self.assertEqual(checked.denied, 'the request mentions "Project X"')

    def test_allows_the_rest(self):
        chat = [message("user", "Hello"), message("assistant", "Hi! Any questions?")]
        self.assertTrue(check(Check.chat("example-model", chat)).allowed)
        no_words = Check.text("example-model", "a secret").request(app.WitWorld)
        self.assertTrue(no_words.allowed, "no words, nothing blocked")

    def test_embedding_inputs_too(self):
        checked = check(Check.embedding("example-model", ["fine", "top secret"]))
        self.assertEqual(checked.denied, 'the request mentions "secret"')

    def test_a_misspelt_setting_fails_the_guard(self):
        misspelt = Check.text("example-model", "Hello").settings({"word": ["secret"]})
        # In the gateway the guard's instance ends, and the request is refused.
        with self.assertRaisesRegex(PluginCrashed, "unknown setting `word`"):
            misspelt.request(app.WitWorld)


if __name__ == "__main__":
    unittest.main()
