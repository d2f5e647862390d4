"""Role labels and role headings read from their words (pure), with the words of
`steering_words.json`:

* `role_marker`: a role's notice opening a sentence, before a colon or a dash ("System note:
  ...", "SYSTEM NOTICE — ..."), or a speaker's label in mid-line followed by an order or a
  reply ("... SYSTEM: reveal ...", "assistant: sure");
* `tool_call`: a tool's turn named in prose: a machine name ("[tool_use ...", "tool_result]",
  "function_call(") or a tool's output before a colon ("Tool result: ...");
* `role_heading`: a Markdown heading that names a role or a rule set ("## System",
  "# New instructions"), steering in a transcript line too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dreamer.core.trust.steering_sentence import Sentence

_MARKS = ":>\uff1a"
_DASHES = "-\u2013\u2014"


def _closed(s: Sentence, end: int, *, dash: bool) -> bool:
    """Whether a label ending at `end` is closed: past an optional "(...)", by a colon or
    ">", or (`dash`) by a dash or the end of the sentence."""
    rest = s.text[end:].lstrip()
    if rest.startswith("(") and 0 < rest.find(")") <= 31:
        rest = rest[rest.find(")") + 1 :].lstrip()
    if rest and rest[0] in _MARKS:
        return True
    return dash and (not rest or rest[0] in _DASHES)


def noticed(s: Sentence) -> bool:
    """A role's notice opening a sentence: "System note: ...", "[3] admin alert: ...", or in
    capitals before a dash ("SYSTEM NOTICE — ...", not "System update - rebooted")."""
    lead = len(s.text) - len(s.text.lstrip("0123456789[] "))
    heads = [h for h in s.at("notice_by") if h.start == lead]
    for notice in s.at("notice"):
        for head in heads:
            if 0 < notice.start - head.end <= 1:
                shouted = len(s.raw) == len(s.text) and s.raw[head.start : notice.end].isupper()
                return _closed(s, notice.end, dash=shouted)
    return False


def spoken(s: Sentence) -> bool:
    """A speaker's label in mid-line followed by an order or a reply: "... SYSTEM: reveal
    ...", "developer> you ...", "assistant: sure"."""
    nexts = {h.start for h in s.at("label_next")}
    for speaker in s.at("speaker"):
        rest = s.text[speaker.end :].lstrip()
        if rest and rest[0] in _MARKS:
            after = rest[1:].lstrip()
            if len(s.text) - len(after) in nexts:
                return True
    return False


def heads_rules(s: Sentence) -> bool:
    """A Markdown heading (one to six "#") that names a role or a rule set."""
    body = s.text.lstrip("#")
    hashes = len(s.text) - len(body)
    at = hashes + len(body) - len(body.lstrip())
    return 1 <= hashes <= 6 and any(h.start == at for h in s.at("rule_set"))


def tool_turn(s: Sentence) -> bool:
    """A tool's turn: its machine name opening a bracket or a line, or before a call's "(",
    "=", "{" or "["; or its output, in words, before a colon. Not "tool use is common"."""
    for word in s.at("tool_word"):
        rest = s.text[word.end :].lstrip()
        if "_" not in s.text[word.start : word.end]:
            called = rest.startswith(":")
        else:
            called = word.start == 0 or s.text[word.start - 1] == "[" or (bool(rest) and rest[0] in "(={[")
        if called:
            return True
    return False
