"""A deny-list guard in Python: refuses requests (and answers) whose text holds a denied word or
matches a denied regular expression.

Settings (`[guards.ID] settings = {...}`):
- `words`: words or phrases, matched case-insensitively as whole words;
- `patterns`: regular expressions (Python's `re` syntax), searched in each text;
- `rules`: the same, named: `[{name = "api-key", pattern = "sk-[A-Za-z0-9]{20,}"},
  {name = "project", words = ["bluebird"]}]`;
- `check_answers` (default true): check the model's answers too.

A denial names the rule (`words #2`, `patterns #1`, or the rule's name), never the text that
matched: what a deny list keeps out is often the secret itself. The gateway names the guard.
"""

import re
from typing import List, Optional, Tuple

from gateway_plugin.guard import Guard, GuardRequest, allow, deny, guard_world, texts

Rule = Tuple[str, "re.Pattern[str]"]
SETTINGS = {"words": [], "patterns": [], "rules": [], "check_answers": True}


def word_pattern(words: List[str]) -> "re.Pattern[str]":
    alternatives = "|".join(re.escape(str(word)) for word in words)
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


def compiled(where: str, pattern: str) -> "re.Pattern[str]":
    try:
        return re.compile(pattern)
    except re.error as e:
        # `e.msg` says what is wrong without quoting the pattern, which may be a secret.
        raise ValueError(f"{where} is not a valid regular expression: {e.msg}") from None


def rules_of(settings: dict) -> List[Rule]:
    rules = [(f"words #{n}", word_pattern([w])) for n, w in enumerate(settings["words"], 1)]
    for n, pattern in enumerate(settings["patterns"], 1):
        rules.append((f"patterns #{n}", compiled(f"patterns #{n}", str(pattern))))
    for n, rule in enumerate(settings["rules"], 1):
        name = str(rule.get("name") or f"rules #{n}")
        if rule.get("pattern"):
            rules.append((name, compiled(f"rule `{name}`", str(rule["pattern"]))))
        if rule.get("words"):
            rules.append((name, word_pattern(list(rule["words"]))))
    return rules


def first_match(rules: List[Rule], candidates: List[str]) -> Optional[str]:
    for name, pattern in rules:
        if any(pattern.search(text) for text in candidates):
            return name
    return None


class DenyList(Guard):
    NAME = "python-guard"
    VERSION = "0.1.0"

    def check_request(self, request: GuardRequest):
        rule = first_match(rules_of(request.settings(**SETTINGS)), texts(request))
        if rule is None:
            return allow()
        return deny(f"the request matches the deny list ({rule})")

    def check_response(self, request: GuardRequest, answer):
        settings = request.settings(**SETTINGS)
        if not settings["check_answers"]:
            return allow()
        rule = first_match(rules_of(settings), texts(answer))
        if rule is None:
            return allow()
        return deny(f"the answer matches the deny list ({rule})")


WitWorld = guard_world(DenyList)
