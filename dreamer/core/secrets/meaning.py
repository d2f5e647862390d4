"""Secrets found by what the words mean, whatever the wording: the `Rule`s `redact` applies
after the vendor formats and before bare assignments and the older prose rules.

A label (`secret_words`: a head such as "password", "PIN", "code", "maiden name", maybe with the
thing it opens: "door code", "WLAN-Passwort", "la password del wifi") and a value of the shape
the head calls for (`secret_shapes`) are found in any of these frames:

* "X is Y", "X: Y", "X - Y", "X | Y", "X は Y", "X lautet Y", "X, c'est Y"; "X Y" for a made-up
  value ("PIN 7305", "password hunter2"); X alone on its line and Y on the next;
* "use Y for X" / "use Y as X" ("usa Luna.Llena.33 como contraseña"), "the door opens with Y",
  "if the alarm beeps, type Y" ("Y is my X", tables and named values: `structure`);
* an AWS secret access key beside its ``AKIA`` id.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dreamer.core.secrets.rules import Rule
from dreamer.core.secrets.shapes import KIND_SHAPES, SHAPES, Span, code, secretish, token
from dreamer.core.secrets.words import (
    AFTER_LABEL,
    ARTICLES,
    CHANGED,
    DOOR,
    EVERYTHING,
    HEADS,
    LOGIN,
    NOW,
    OPEN_VERBS,
    OPEN_WITH,
    PERSONAL_QUESTION,
    PLAIN_WORD_HEADS,
    PREPOSITIONS,
    QUESTIONS,
    TARGETS,
    THINGS,
    TYPE_VERBS,
    USE_FOR,
    USE_VERBS,
    VERBS,
)

_LATIN = r"A-Za-z0-9\u00c0-\u024f"
_B = rf"(?<![{_LATIN}])"  # no Latin letter or digit just before (a label may follow "の" or "-")
_E = rf"(?![{_LATIN}])"
_START = r"(?=[^\W\d_]|\d+[\s\-]?(?:digit|word|fa))"  # a label starts with a letter, or "3-digit", "2FA"
_THING_ALT = "|".join(f"(?:{'|'.join(words)})" for _, words in THINGS)
_HEAD_ALT = "|".join(f"(?P<h{i}>{'|'.join(words)})" for i, (_, _, words) in enumerate(HEADS))
_THING_RES = tuple((kind, re.compile(rf"(?i){_B}(?:{'|'.join(words)})")) for kind, words in THINGS)
_QWORD = r"[^\s:=|：,;.!?]+"
_LONE_KINDS = ("wifi_password", "alarm_code", "safe_combination", "locker_code", "door_code")
_QUESTION_RE = re.compile(rf"(?i)(?:{QUESTIONS})|{PERSONAL_QUESTION}")
_PLAIN_WORD_HEAD = re.compile(rf"(?i){PLAIN_WORD_HEADS}")
_DOOR_RE = re.compile(rf"(?i){DOOR}")
_LOGIN_RE = re.compile(rf"(?i)\b(?:{LOGIN})\b")

_LONE = "|".join(f"(?:{'|'.join(words)})" for kind, words in THINGS if kind in _LONE_KINDS)
_LONE_SAID = "|".join(f"(?:{'|'.join(words)})" for kind, words in THINGS if kind in ("locker_code", "safe_combination"))
LABEL = (
    rf"(?P<label>(?:(?P<pre>{_THING_ALT})(?:['’]s[ \t]+|[ \t]*-?[ \t]*|の(?:解除)?))?(?P<head>{_HEAD_ALT})(?:s|の)?{_E}(?:[ \t]+(?:{AFTER_LABEL}){_E})?"
    rf"(?:[ \t]*-?[ \t]*(?P<post>{_THING_ALT}){_E})?|(?P<lone>(?:{_LONE}){_E}(?=(?:[ \t]*\([^()\n]{{1,30}}\))?[ \t]*[:：]|[ \t]+[#*]?\d)"
    rf"|(?:{_LONE_SAID}){_E}(?=[^\n]{{0,40}}?[ \t](?:{VERBS})[ \t]+[#*]?\d)))"
)
"""A label: a head with the thing it opens, or a thing alone before a colon or a number:
"Alarm: 6543", "front door 4417#" (`_forward` wants four digits or more of it)."""
_CAP = r"(?-i:[A-ZÀ-Þ])"  # a capital: "le mot de passe Orange est ..." (a name, not a word)
_QUAL = (
    rf"(?P<qual>[ \t]+(?:{PREPOSITIONS})(?:[ \t]+|(?<=['’]))(?:{_QWORD}[ \t]+){{0,5}}?{_QWORD}"
    rf"|[ \t]+{_CAP}[\w\-]*(?=,?[ \t]+(?:{VERBS}){_E}|[ \t]*[:：])|[ \t]*\([^()\n]{{1,30}}\)"
    rf"|(?P<loose>(?:[ \t]+[^\W\d_]+){{2,4}}?(?=[ \t]+(?:{VERBS}){_E})))?"  # "the password they gave me is ..."
)
_SEP = (
    r"(?P<sep>[ \t]*(?:[:：]|=(?!=))[ \t]*(?:\n[ \t]*)?"
    r"|[ \t]+\|[ \t]*|[ \t]*(?:\||\t)[ \t]+|\t|[ \t]+(?:[\-–—→]|->|=>)[ \t]+"  # a cell; not "a|b" in a regex
    rf"|,?(?:[ \t]+(?:{VERBS}){_E})?[ \t]+(?:{CHANGED}){_E}[ \t]*"
    r"|[ \t]*\?[ \t]*(?:it['’]s|it[ \t]+is|c['’]est|es|ist|é|è)[ \t]*:?[ \t]*"
    r"|(?P<ask>[ \t]*\?[ \t]+)"  # "wifi password? Tr0ub4dor&3": a made-up value only
    rf"|,?[ \t]+(?:{VERBS}){_E}(?:[ \t]+(?:{NOW}){_E})?[ \t]*:?[ \t]*"
    r"|[ \t]*[はが][ \t]*|[ \t]*\n[ \t]*"
    r"|[ \t]+(?P<to>to|into)[ \t]+|[ \t]*(?P<wo>を)[ \t]*"  # "changed to X", "パスワードを X に変更"
    r"|[ \t]+(?:n[°º.]|no\.|nr\.|#)[ \t]*"  # "carta d'identità n. X"
    # "X Y", "X's Y"; after "for the ..." only digits: "combinaison du cadenas 0815"
    rf"|(?(qual)(?P<qbare>[ \t]+)(?=[#*]?\d)(?![^\n]{{0,30}}?[ \t](?:{VERBS}){_E})"  # not "in room 12 is ..."
    r"|(?:(?P<bare>[ \t]+|(?=[「『]))|['’]s[ \t]*:?[ \t]*)))"
)
FORWARD_RE = re.compile(rf"(?i){_B}{_START}{LABEL}{_QUAL}(?:[\"'](?=[ \t]*[:=]))?{_SEP}(?=(?P<tail>[^\n]{{0,300}}))")

_END = rf"(?=[ \t]*(?:$|[\n.,;:!?)」。]|(?:{PREPOSITIONS}|and|et|und|y|e){_E}))"
_TOKEN_CHARS = r"[^\s\"“”«»「」`,;]"
_TOWARDS = rf"(?:(?:{ARTICLES})(?:[ \t]+|(?<=['’]))){{0,2}}(?:[\w\-]+[ \t]+){{0,2}}?"
USE_RE = re.compile(
    rf"(?i){_B}(?:{USE_VERBS})[ \t]+(?P<val>{_TOKEN_CHARS}{{3,80}})[ \t]+(?:{USE_FOR})[ \t]+{_TOWARDS}"
    rf"(?:{LABEL}|(?P<target>{TARGETS}|{_THING_ALT}){_E}|(?P<all>{EVERYTHING}){_E}){_END}"
)
_WHICH = r"(?:(?:the|le|den|el|o|il)[ \t]+)?(?:(?:code|codice|c[óo]digo)[ \t]+)?"
OPENS_RE = re.compile(  # "the door opens with 7720", "if the alarm beeps, type 5521"
    rf"(?i){_B}(?=[^\W\d_])(?P<thing>{_THING_ALT}){_E}(?:[ \t]+(?:{OPEN_VERBS})[ \t]+(?:{OPEN_WITH})[ \t]+"
    rf"{_WHICH}(?P<val>{_TOKEN_CHARS}{{3,80}})"
    rf"|[^\n.;!?]{{0,50}}?[ \t,](?:{TYPE_VERBS})[ \t]+{_WHICH}(?P<val2>[#*]?\d[\d \-]{{2,14}}))"
)
_AWS_VALUE = (
    r"(?<![A-Za-z0-9/+])(?P<val>(?=[A-Za-z0-9/+]*[0-9])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])"
    r"[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)
_AWS_ID = r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"
_NEAR = r"[^\n]{0,100}?(?:\n[^\n]{0,100}?)?"  # on the same line or the next
AWS_AFTER_ID_RE = re.compile(rf"{_AWS_ID}{_NEAR}{_AWS_VALUE}")
AWS_BEFORE_ID_RE = re.compile(rf"{_AWS_VALUE}{_NEAR}{_AWS_ID}")


# --- kinds ---------------------------------------------------------------------------------


def _family(m: re.Match[str]) -> tuple[str, str]:
    """(family, default kind) of the head that matched, or of a thing said alone."""
    if m.group("lone") is not None:
        kind = _thing(m.group("lone")) or "password"
        return ("word" if kind == "wifi_password" else "code"), kind
    for i, (family, kind, _) in enumerate(HEADS):
        if m.group(f"h{i}") is not None:
            return family, kind
    return "word", "password"


def _thing(text: str) -> str | None:
    """The kind named by the first thing said in `text` (the label and the words after it)."""
    best: tuple[int, str] | None = None
    for kind, rx in _THING_RES:
        if (t := rx.search(text)) is not None and (best is None or t.start() < best[0]):
            best = (t.start(), kind)
    return best[1] if best else None


def _before(m: re.Match[str], reach: int) -> str:
    """Up to `reach` characters before the match, on its line."""
    head = m.string[max(0, m.start() - reach) : m.start()]
    return head[head.rfind("\n") + 1 :]


def label_kind(m: re.Match[str], extra: str = "", after: str = "") -> tuple[str, str] | None:
    """(family, kind) of a label: a password, PIN, key or code names the thing it opens (said
    with it, or just before it on the line: "Wi-Fi: network Oak, key ..."); a key or a code
    that opens nothing said is no secret's label, nor an "answer" to no security question."""
    family, kind = _family(m)
    if kind == "answer":
        return (family, "security_answer") if _QUESTION_RE.search(_before(m, 80)) else None
    if kind == "pass":  # a bare "pass" counts beside a Wi-Fi or a user name only
        if _thing(_before(m, 60) + " " + extra) == "wifi_password":
            return family, "wifi_password"
        return (family, "password") if _LOGIN_RE.search(_before(m, 60)) else None
    if family not in ("word", "key", "code") or kind == "cvv" or m.group("lone") is not None:
        return family, kind
    thing = _thing(" ".join(p for p in (m.group("label"), extra) if p))
    if thing is None and kind in ("code", "key"):  # "Wi-Fi: Oak, key ...", "the combo is 1-2-3 for the bike lock"
        thing = _thing(_before(m, 40)) or _thing(after.split("\n")[0])
    if family == "word":
        return family, "wifi_password" if thing == "wifi_password" else kind
    if thing is not None:
        return ("word" if thing == "wifi_password" else "code"), thing
    return None if kind in ("code", "key") else (family, kind)


# --- frames -----------------------------------------------------------------------------------


def _how(m: re.Match[str]) -> str:
    sep = m.group("sep")
    if m.group("to") is not None or m.group("wo") is not None:
        return "to"
    if "\n" in sep and not re.search(r"[:：=]", sep):
        return "line"
    return "verb" if all(m.group(g) is None for g in ("bare", "qbare", "ask")) else "bare"


def _alone_on_line(m: re.Match[str]) -> bool:
    """A label on a line of its own, before its value on the next line."""
    head = m.string[m.string.rfind("\n", 0, m.start()) + 1 : m.start()]
    return bool(re.fullmatch(rf"(?i)[ \t\-*•>#|]*(?:(?:{ARTICLES})[ \t]+)?", head))


def _forward(m: re.Match[str]) -> tuple[int, int, str] | None:
    found = label_kind(m, m.group("qual") or "", after=m.group("tail")[:60])
    if found is None:
        return None
    family, kind = found
    how = _how(m)
    if m.group("qbare") is not None and family != "code":
        return None
    if how == "line" and not _alone_on_line(m):
        return None
    shape = KIND_SHAPES.get(kind, SHAPES[family])
    if m.group("lone") is not None and family == "code":
        if how == "bare" and kind == "door_code" and not _DOOR_RE.search(m.group("lone")):
            return None  # "gate 4512" is a gate's number; "front door 4417#" a code
        said = how == "verb" and not re.search(r"[:：]", m.group("sep"))
        if said and kind not in ("locker_code", "safe_combination"):
            return None  # "the lock on the shed is 3-9-1-7"; "the alarm is 0630" may be a time
        shape = _four_digits
    elif m.group("lone") is not None and how == "bare":  # "wifi CasaBlanca99" may be the network's name
        return None
    span: Span | None = _in_brackets(shape, m.group("tail"), how)
    loose = m.group("loose") is not None and family not in ("code", "otp")
    if span is None or (loose and not _made_up(m.group("tail")[span[0] : span[1]])):
        return None
    value = m.group("tail")[span[0] : span[1]]
    if family == "word" and value.isalpha() and not _PLAIN_WORD_HEAD.fullmatch(m.group("head") or ""):
        if m.group("tail")[: span[0]].strip() == "":  # a plain word, not quoted: "la clave es practicar"
            return None
    base = m.start("tail")
    return base + span[0], base + span[1], kind


def _in_brackets(shape: Callable[[str, str], Span | None], tail: str, how: str) -> Span | None:
    """The value's span, also when it stands in brackets: "door code (4471)"."""
    if not tail.startswith(("(", "[")) or tail.startswith("[REDACTED"):
        return shape(tail, how)
    span = shape(tail[1:], how)
    if span is None or tail[1 + span[1] : 2 + span[1]] not in (")", "]"):
        return None
    return span[0] + 1, span[1] + 1


def _made_up(value: str) -> bool:
    """A value surely made up: letters and digits, not a word nor a name starting with a number."""
    return secretish(value) and any(c.isdigit() for c in value) and len(value) >= 6 and not value[0].isdigit()


def _strong(value: str) -> bool:
    """Letters, digits and a symbol or an inner capital: "Falcon#2030", not "Python3"."""
    inner_capital = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    symbol = any(not c.isalnum() for c in value)
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value) and (symbol or inner_capital)


def _four_digits(tail: str, how: str) -> Span | None:
    """A code after a thing said alone ("alarm 2580"): four digits or more, not a door's number."""
    return code(tail, how, low=4)


def _reads_as_given(value: str, family: str, at_start: bool) -> bool:
    """A value said before its label: made up, or digits for a code, or one capitalised word
    opening the sentence ("Swordfish is my password")."""
    if family in ("code", "otp", "list") or value.isdigit():
        return code(value, "verb") == (0, len(value))
    if secretish(value):
        return len(value) >= 5
    return at_start and value[:1].isupper() and value.isalpha() and family in ("word", "answer")


def _backward(m: re.Match[str]) -> tuple[int, int, str] | None:
    after = m.string[m.end() : m.end() + 60]  # "4417 is the code for the front door"
    found = label_kind(m, after=after) if m.group("label") is not None else ("word", _target_kind(m))
    if found is None:
        return None
    family, kind = found
    group = "val"
    span = token(m.group(group))
    if span is None:
        return None
    value = m.group(group)[span[0] : span[1]]
    at_start = not m.string[: m.start(group)].strip() or m.string[: m.start(group)].rstrip()[-1] in ".:\n!?"
    if not _reads_as_given(value, family, at_start):
        return None
    if m.groupdict().get("all") is not None and not _strong(value):  # "I use X for everything"
        return None
    return m.start(group) + span[0], m.start(group) + span[1], kind


def _target_kind(m: re.Match[str]) -> str:
    return _thing(m.group("target") or "") or "password"


def _opens(m: re.Match[str]) -> tuple[int, int, str] | None:
    """What a door, an alarm, a safe opens with: "the door opens with 7720"; the code typed at it."""
    group = "val" if m.group("val") is not None else "val2"
    span = token(m.group(group))
    if span is None:
        return None
    value = m.group(group)[span[0] : span[1]]
    if code(value, "verb") != (0, len(value)) and not (secretish(value) and len(value) >= 5):
        return None
    return m.start(group) + span[0], m.start(group) + span[1], _thing(m.group("thing")) or "password"


Found = tuple[int, int, str] | None
_CASED = re.compile(r"\(\?-i:([^()]*)\)")  # a case-sensitive part, lower-cased for the folded scan


def _rule(pattern: re.Pattern[str], read: Callable[[re.Match[str]], Found]) -> Rule:
    """A `Rule` whose check, span and kind all come from one reading of the match (kept for
    the match `redact` asks about next)."""
    last: list[tuple[re.Match[str], Found]] = []

    def once(m: re.Match[str]) -> Found:
        kept = last[:1]
        if kept and kept[0][0] is m:
            return kept[0][1]
        found = read(m)
        last[:] = [(m, found)]  # another thread may replace it: this call returns its own reading
        return found

    def span(m: re.Match[str]) -> tuple[int, int]:
        found = once(m)
        return (found[0], found[1]) if found else (0, 0)

    def kind(m: re.Match[str]) -> str:
        found = once(m)
        return found[2] if found else "secret"

    folded = re.compile(_CASED.sub(lambda c: f"(?:{c.group(1).lower()})", pattern.pattern.removeprefix("(?i)")))
    return Rule(kind, pattern, 0, lambda m: once(m) is not None, span=span, folded=folded)


FORWARD_RULE = _rule(FORWARD_RE, _forward)

MEANING_RULES: tuple[Rule, ...] = (
    Rule("aws_secret_key", AWS_AFTER_ID_RE, "val"),
    Rule("aws_secret_key", AWS_BEFORE_ID_RE, "val"),
    FORWARD_RULE,
    _rule(USE_RE, _backward),
    _rule(OPENS_RE, _opens),
)
