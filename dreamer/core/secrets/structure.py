"""Secrets found by structure, in any language: a value shaped as the secret its label names
(`values`), near a label (`labels`): after it on its line, before it, on the next line when the
label's line gives none, or under it in a table; and the answer to a question that asked for a
secret (`secrets_in_answer`). A run of twelve BIP-39 words is a recovery phrase without a label.

No verb, no word order and no spelling is assumed: a label, a value of the right shape within
the clause, and nothing else."""

from __future__ import annotations

import re

from dreamer.core.secrets.labels import Label, find_labels, mentions, spaceless, wordish
from dreamer.core.secrets.shapes import unit_after
from dreamer.core.secrets.values import (
    Token,
    code,
    code_list,
    credential,
    grouped,
    hides_credential,
    id_number,
    made_up,
    scrambled,
    seed_runs,
    token_key,
    tokens,
    word_run,
)

Found = tuple[int, int, str]

_CLAUSE_END = re.compile(r"[.?。？؟।۔;](?=\s|$)|\n")
_REACH = 90  # how far after a label its value may be
_SPEAKER = re.compile(r"[ \t]*(?:[-–—•*>]+|[^\s:：]{1,3}[ \t]*[:：]|「|\"|“)?[ \t]*")
_TABLE_RULE = re.compile(r"[\s|:+\-]*")
_NAMED = re.compile(r"[ \t]*[,;][ \t]*[^\W\d_][\w'’ \-]{0,24}?[ \t]*(?:=|:|->|→)[ \t]*(?=\S)")
_YEAR = re.compile(r"19[5-9]\d|20[0-3]\d")  # a year near ours
_CODES = {"pin": (4, 8), "door_code": (3, 8), "otp": (4, 8), "cvv": (3, 4), "access": (4, 8)}
_NUMBERS = {"national_id": id_number, "bank_account": id_number, "recovery_code": code_list}


def _shaped(kind: str, value: str, least: int = 5) -> bool:
    """Whether `value` has the shape of a secret of `kind` (`least`: digits a password needs)."""
    if kind in ("password", "access"):
        made = credential(value) or scrambled(value) or hides_credential(value)
        return made or code(value, least if kind == "password" else 4, 12)
    if kind in _NUMBERS:
        return _NUMBERS[kind](value)
    if kind == "api_key":
        return token_key(value, 16)
    if kind not in _CODES:
        return False  # a security answer, a recovery phrase: read by their own shapes
    low, high = _CODES[kind]
    return code(value, low, high)


def _kind_of(label: Label, text: str, value: str) -> str:
    """What an ``access`` phrase's value opens: a door, a PIN, else a password."""
    if label.kind != "access":
        return label.kind
    line = text[text.rfind("\n", 0, label.start) + 1 : label.end + 60]
    if mentions(line, "door") or any(lab.kind == "door_code" for lab in find_labels(line)):
        return "door_code"
    return "pin" if code(value, 4, 8) else "password"


def _first(text: str, kind: str, span: Token, most: int = 8, least: int = 5) -> Token | None:
    """The first token of `kind`'s shape in `text[span]`, among its first `most` tokens."""
    if kind == "seed_phrase":
        for s, _ in list(tokens(text, *span))[:most]:
            if (run := word_run(text, s, 6)) is not None:
                return run
        return None
    for i, (s, e) in enumerate(tokens(text, *span)):
        if i >= most:
            break
        if "[REDACTED" in text[s:e]:
            return None  # the value was found already
        glued = wordish(text[s - 1]) and not (spaceless(text[s - 1]) and text[s].isdecimal())  # "身份证号码1101..."
        if s == span[0] and s > 0 and (glued or text[s - 1] == "]"):  # "pw:X", not "url_pw]@"
            if text[s] not in ":=：" or s + 1 >= e:
                continue
            s += 1
        if _YEAR.fullmatch(text[s:e]) and i > 1:
            continue  # "the alarm code was changed in 2023"
        if "," in text[s:e] and text[s].isdecimal():
            e = text.index(",", s, e)  # "验证码为185406,5分钟内有效"
        if (kind in _CODES or kind in _NUMBERS) and _counted(text, e):
            continue  # "the safe costs 249 dollars"
        if (kind in _CODES or kind in _NUMBERS) and _shaped(kind, text[s : (g := grouped(text, s, e))], least):
            return s, g  # "817 455"
        if _shaped(kind, text[s:e], least):
            return s, e
    return None


def _counted(text: str, end: int) -> bool:
    """Whether a unit follows the number ending at `end` ("249 dollars", "8 characters")."""
    return unit_after(text, end)


def _clause_after(text: str, start: int) -> int:
    m = _CLAUSE_END.search(text, start, min(len(text), start + _REACH))
    if m:
        return m.start()
    end = min(len(text), start + _REACH)
    while end < len(text) and not text[end].isspace():
        end += 1  # a long value the reach cuts is read whole
    return end


def _name(value: str) -> bool:
    """Words of letters (in any script, with their marks), maybe quoted: an answer, not code."""
    value = value.strip("「」“”\"'«»")
    return (
        bool(value)
        and value[0].isalpha()
        and all(c.isalpha() or wordish(c) and not c.isdigit() or c in " '’-" for c in value)
    )


def _answer_words(text: str, start: int, end: int) -> Token | None:
    """A security answer: one to three words after a colon or a short word, ending the line."""
    rest = text[start:end]
    m = re.match(r"[^\n]{0,60}[:：][ \t]*|[^\n:：]{0,40}?[\-–—][ \t]*|(?P<said>(?:[ \t]+\S{1,3})?[ \t]+)", rest)
    if m is None:
        return None
    value = rest[m.end() :].strip()
    if "[REDACTED" in rest:
        return None
    words = value.split()
    made = len(words) == 1 and credential(value.strip("«»“”\"'"))  # "«Ракушка29»"
    if not 1 <= len(words) <= 3 or not (_name(value.rstrip(".。!")) or made):
        return None
    if m.group("said") is not None and (len(words) > 1 or value[0].islower()):
        return None  # without a colon, one name only: "... na Bingo", not "... was wrong"
    s = start + m.end() + (len(rest[m.end() :]) - len(rest[m.end() :].lstrip()))
    return s, s + len(value.rstrip(".。!"))


def _after(text: str, label: Label) -> list[Token]:
    """The value after a label in its clause, and the named values that follow it ("PINs: bank
    = 1234, phone = 5678")."""
    line_end = text.find("\n", label.end)
    line_end = len(text) if line_end < 0 else line_end
    if label.kind == "security_answer":
        return [span] if (span := _answer_words(text, label.end, line_end)) else []
    end = line_end if label.kind == "seed_phrase" else _clause_after(text, label.end)
    found = [span] if (span := _first(text, label.kind, (label.end, end))) else []
    while found and (named := _NAMED.match(text, found[-1][1])):
        if (span := _first(text, label.kind, (named.end(), _clause_after(text, named.end())), 1)) is None:
            break
        found.append(span)
    return found


def _before(text: str, label: Label) -> Token | None:
    """A value just before its label: made up ("Xk9$vLp2 ist mein Passwort"), or a code that
    opens the sentence ("2468 is my bank card PIN", "use 2580 to open the door")."""
    line_start = max(text.rfind("\n", 0, label.start) + 1, label.start - 120)
    before = list(tokens(text, line_start, label.start))[-5:]
    for i, (s, e) in enumerate(before):
        gap = text[e : label.start]
        if gap.strip() == gap or _CLAUSE_END.search(gap):
            continue
        words = gap.split()
        close = i == len(before) - 1 - len(words) and len(words) <= 2 and all(len(w) <= 4 for w in words)
        opens = (
            not text[line_start:s].strip()
            or (i == 1 and len(before) == 5 and _shaped(label.kind, text[s:e]))
            or close  # "552 913 is the login code"
        )
        if _hash(text[s:e]):
            continue  # "commit 9f2c1ab fixes the login"
        if label.kind in ("password", "access") and credential(text[s:e], 6) or _shaped("api_key", text[s:e]):
            return s, e
        if label.kind in _CODES and label.kind != "access" and opens:
            first = _group_start(text, line_start, s)
            if _shaped(label.kind, text[first:e]):
                return first, e
        if label.kind == "access" and i <= 1 and code(text[s:e], 4, 8):
            return s, e
    return None


def _hash(value: str) -> bool:
    """A commit or content hash: seven to sixty-four lower-case hex digits, with a letter."""
    return 7 <= len(value) <= 64 and all(c in "0123456789abcdef" for c in value) and not value.isdecimal()


def _group_start(text: str, line_start: int, s: int) -> int:
    """Where a code of digit groups that ends with the digits at `s` begins ("552 913")."""
    while (m := _GROUP_BEFORE.search(text, line_start, s)) is not None and grouped(text, m.start(), m.end()) >= s:
        s = m.start()
    return s


_GROUP_BEFORE = re.compile(r"(?<![\w\-])\d{2,4}[ \u00a0]$")


def answer_span(kind: str, answer: str, base: int = 0) -> Token | None:
    """The secret of `kind` in a short answer (the line after a question or a label alone)."""
    m = _SPEAKER.match(answer)
    start = m.end() if m else 0
    body = answer[start:].strip()
    if not body:
        return None
    if kind == "security_answer":
        words = body.split()
        if len(words) > 3 or not (_name(body.rstrip('.。!」"')) or len(words) == 1 and credential(body)):
            return None
        s = base + start + answer[start:].index(body[0])
        return s, s + len(body.rstrip('.。!」"'))
    if kind != "seed_phrase" and len(body.split()) > 4:
        return None
    span = _first(answer, kind, (start, len(answer)), 4, least=4)  # asked for: "1234" will do
    return (base + span[0], base + span[1]) if span else None


def _next_line(text: str, label: Label) -> Token | None:
    """The value on the line after a label whose own line gives none (a label alone, a question)."""
    nl = text.find("\n", label.end)
    if nl < 0 or len(list(tokens(text, label.end, nl))) > 6:
        return None
    end = text.find("\n", nl + 1)
    end = len(text) if end < 0 else end
    return answer_span(label.kind, text[nl + 1 : end], nl + 1)


def _cells(line: str) -> list[tuple[int, int]]:
    """The spans of a table row's cells (``| a | b |`` or tab-separated), or []."""
    sep = "|" if line.count("|") >= 2 else "\t"
    if line.count(sep) < (2 if sep == "|" else 1):
        return []
    spans, pos = [], 0
    for part in line.split(sep):
        spans.append((pos, pos + len(part)))
        pos += len(part) + 1
    return spans[1:-1] if sep == "|" and line.strip().startswith("|") else spans


def _in_column(text: str, label: Label) -> list[Found]:
    """The values under a label that heads a table column."""
    head = text.rfind("\n", 0, label.start) + 1
    end = text.find("\n", label.start)
    end = len(text) if end < 0 else end
    cells = _cells(text[head:end])
    col = next((i for i, (s, e) in enumerate(cells) if s <= label.end - 1 - head < e), None)
    if col is None:
        return []
    found: list[Found] = []
    pos = end + 1
    while pos < len(text):
        stop = text.find("\n", pos)
        stop = len(text) if stop < 0 else stop
        row = text[pos:stop]
        cells = _cells(row)
        if not cells:
            break
        if not _TABLE_RULE.fullmatch(row) and col < len(cells):
            s, e = cells[col]
            span = answer_span(label.kind, row[s:e], pos + s)
            if span:
                found.append((*span, label.kind))
        pos = stop + 1
    return found


def find_by_structure(text: str) -> list[Found]:
    """(start, end, kind) of each secret a label names, and of each recovery phrase."""
    found: list[Found] = [(s, e, "seed_phrase") for s, e in seed_runs(text)]
    found += [(s, e, "password") for s, e in tokens(text) if made_up(text[s:e])]
    last = -9
    for label in find_labels(text):
        if 0 <= label.start - last < 3 and not any(c.isspace() for c in text[last : label.start]):
            continue  # labels glued into one run ("password=password=...") are read once
        last = label.end
        spans = _after(text, label) or [span for span in (_before(text, label) or _next_line(text, label),) if span]
        found += [(*span, _kind_of(label, text, text[span[0] : span[1]])) for span in spans]
        if "|" in text or "\t" in text:
            found += _in_column(text, label)
    return found


def secrets_in_answer(asked: str, answer: str) -> list[Found]:
    """(start, end, kind) of the secret that `answer` gives to `asked`, a message that asked
    for one in its last sentence ("What's the Wi-Fi password?" then "it's Limon.Verde7")."""
    tail = asked.rstrip()[-300:]
    if not tail.endswith(("?", "？", "؟", ";", ":", "：")) or find_by_structure(tail):
        return []  # a question or a prompt ("Enter your PIN:") that gives no secret itself
    tail = tail[max((tail.rfind(mark, 0, -1) for mark in ".!?。！？\n"), default=-1) + 1 :]
    labels = [lab for lab in find_labels(tail) if lab.kind != "access"]
    if not answer.strip():
        return []
    if not labels:  # asked for a code of no kind named: "qual foi o código que chegou por SMS?"
        return [(*span, "otp")] if mentions(tail, "code") and (span := answer_span("otp", answer)) else []
    kind = labels[-1].kind
    span = answer_span(kind, answer) or _first(answer, kind, (0, len(answer)), 6)
    return [(*span, kind)] if span else []
