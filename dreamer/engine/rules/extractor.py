"""The rules extractor (explicit statements only, no model) and the triage that keeps
chunks without a hint of one away from the model. Statements of state and change in ordinary
talk are read by the table of `rules_slots`, grouped by slot; neither reads a question, a
supposition or someone else's news."""

from __future__ import annotations

import re

from dreamer.core.topics import infer_topic
from dreamer.engine.extraction.extract import Candidate, ExtractResult, Kind, collapse_duplicates
from dreamer.engine.extraction.transcript import Chunk, Line
from dreamer.engine.rules.casual import read_casual
from dreamer.engine.rules.slots import slot_matches
from dreamer.engine.rules.words import blocked_spans, conjugate

_S = r"(?:(?!,? (?:and|but|so) I\b|, (?:but|so) |, I\b|,? (?:so|because|bc|cause|since) |,? here in\b)[^.!?\n]){3,200}"
_HAPPENS = r"(?:get|gets|got|end up|ends up|seem|seems|manage|forget|feel|find|have to|had to)\b"
_AGENT_RULES: list[tuple[Kind, re.Pattern[str]]] = [
    (
        "preference",
        re.compile(rf"\bI (?:really )?(?:prefer|like|love|enjoy|hate|dislike|can't stand|don't like){_S}", re.I),
    ),
    (
        "preference",
        re.compile(
            rf"\b(?:please )?(?:always|never) (?:use|write|call|reply|answer|give|show|include|add|put|keep|format|make){_S}",
            re.I,
        ),
    ),
    # a habit, not what keeps happening to the user ("I never get a quiet morning")
    ("preference", re.compile(rf"\bI (?:always|never|usually) (?!{_HAPPENS}){_S}", re.I)),
    ("profile", re.compile(rf"\bmy name is {_S}", re.I)),
    (
        "profile",
        re.compile(rf"\b(?:call me|I live in|I work (?:as|at|for|on)|I'm from|I am from|I grew up in){_S}", re.I),
    ),
    (
        "profile",
        re.compile(
            rf"\bI(?:'m| am) (?:just |only |now |still |currently )?an? (?!bit\b|little\b|lot\b)[a-z]{_S}", re.I
        ),
    ),
    (
        "profile",
        re.compile(r"\bI(?:'m| am) (?:vegetarian|vegan|pescatarian|lactose intolerant|allergic to [\w -]{2,60})", re.I),
    ),
    ("focus", re.compile(rf"\bI(?:'m| am) (?:working on|learning|building|training for|preparing for){_S}", re.I)),
]
_CODE_RULES: list[tuple[Kind, re.Pattern[str]]] = [
    ("root_cause", re.compile(rf"\b(?:the )?root cause (?:was|is|:){_S}", re.I)),
    ("root_cause", re.compile(rf"\b(?:it was |this was |the bug was )?fixed by {_S}", re.I)),
    ("root_cause", re.compile(rf"\b(?:the )?(?:bug|crash|failure|error) was caused by {_S}", re.I)),
    (
        "interface_behavior",
        re.compile(rf"\b(?:[\w.()]+ ){{0,2}}[\w.()]+ (?:returns|raises|throws) {_S}\b(?:when|if|on|for) {_S}", re.I),
    ),
    ("design_decision", re.compile(rf"\bwe(?:'ve| have)? decided (?:to|that|on) {_S}", re.I)),
    ("design_decision", re.compile(rf"\b(?:the )?decision (?:was|is|:) {_S}", re.I)),
]
_ADVERB = r"(?:(?:really|usually|always|never|also|often|mostly|just|still) )?"
_I_VERB = re.compile(rf"\bI ({_ADVERB})([A-Za-z']+)")
_PERSON = [
    (re.compile(r"\bI'm\b"), "the user is"),
    (re.compile(r"\bI've\b"), "the user has"),
    (re.compile(r"\bI'd\b"), "the user would"),
    (re.compile(r"\bmy\b", re.I), "the user's"),
    (re.compile(r"\bme\b", re.I), "the user"),
    (re.compile(r"\bmyself\b", re.I), "themselves"),
]


def _third_person(sentence: str) -> str:
    sentence = re.sub(r"^(?:please )?(always|never)\b", r"the user asks to \1", sentence.strip(), flags=re.I)
    sentence = re.sub(r"\b(I(?:'m| am)) (?:just|only|still|currently) (?=an? )", r"\1 ", sentence)
    sentence = _I_VERB.sub(lambda m: f"the user {m.group(1)}{conjugate(m.group(2))}", sentence)
    for pattern, repl in _PERSON:
        sentence = pattern.sub(repl, sentence)
    sentence = re.sub(r"\bI\b", "the user", sentence)
    sentence = sentence.strip(" ,;:-")
    sentence = sentence[0].upper() + sentence[1:] if sentence else sentence
    return sentence if sentence.endswith((".", "!", "?")) else sentence + "."


def rule_matches(text: str, mode: str) -> list[tuple[Kind, str]]:
    """(kind, statement as one sentence about the user, or the project's in code mode) for each
    statement in `text`, in the order said (a later value of a slot is the newer one): statements
    of state and change are read before the explicit ones and win where both match; in agent
    mode, none in a question, a supposition or reported speech, and casual lowercase talk is
    read as if written out (`read_casual`)."""
    if mode != "code":
        text = read_casual(text)
    blocked = blocked_spans(text) if mode != "code" else []
    found: list[tuple[int, Kind, str]] = []
    taken: list[tuple[int, int]] = []
    if mode != "code":
        for kind, sentence, start, end in slot_matches(text, blocked):
            taken.append((start, end))
            found.append((start, kind, sentence))
    for kind, pattern in _CODE_RULES if mode == "code" else _AGENT_RULES:
        for m in pattern.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in taken) or any(s <= m.start() < e for s, e in blocked):
                continue
            end = min([m.end()] + [s for s, _ in blocked if m.start() < s < m.end()])  # not into a question
            taken.append((m.start(), end))
            said = text[m.start() : end]
            found.append((m.start(), kind, _sentence(said) if mode == "code" else _third_person(said)))
    return [(kind, sentence) for _, kind, sentence in sorted(found, key=lambda f: f[0])]


class RulesExtractor:
    """Explicit statements only, each with the slot its phrasing names (`infer_topic`); no model
    involved. Named `rules` in every output."""

    name = "rules"

    def __init__(self, *, limit: int) -> None:
        self.limit = limit

    def extract(self, chunk: Chunk, mode: str) -> ExtractResult:
        out: list[Candidate] = []
        for line in chunk.lines:
            if line.context_only or not _speaks_for_user(line, mode):
                continue
            for kind, text in rule_matches(line.text, mode):
                if mode != "code" and says_nothing(text):
                    continue
                topic = infer_topic(text, kind)
                out.append(
                    Candidate(
                        kind=kind,
                        text=text,
                        importance=0.5,
                        seqs=[line.seq],
                        tags=["rules"],
                        topic=topic.key if topic else None,
                        cardinality=topic.cardinality if topic else None,
                    )
                )
        return ExtractResult(candidates=collapse_duplicates(out)[: self.limit * chunk.sessions])


_EMPTY = re.compile(
    r"\?\s*$|[,;]\s*(?:is that|is it|should i|should the user|can i|can the user|would that)\b"
    r"|\b(?:loves?|likes?|hates?|enjoys?|prefers?|wants?|needs?)\s+(?:it|that|this|them|those|these)\s*[.!]?$",
    re.I,
)


def says_nothing(statement: str) -> bool:
    """A statement that keeps nothing: a question ("is that enough for 10k?"), or a liking of
    what only the talk around it names ("the user loves it")."""
    return bool(_EMPTY.search(statement))


def _speaks_for_user(line: Line, mode: str) -> bool:
    return line.role == "user" or (mode == "code" and line.role == "assistant")


def _sentence(statement: str) -> str:
    s = statement.strip(" ,;:-")
    s = s[0].upper() + s[1:] if s else s
    return s if s.endswith((".", "!", "?")) else s + "."


def worth_a_call(chunk: Chunk, mode: str) -> bool:
    """Triage: does the chunk hold any statement the rules recognise, or a hint of one?"""
    hints = _CODE_HINTS if mode == "code" else _AGENT_HINTS
    for line in chunk.lines:
        if line.context_only:
            continue
        if rule_matches(line.text, mode) or hints.search(line.text):
            return True
    return False


_AGENT_HINTS = re.compile(
    r"\b(?:I|I'm|I've|my|me|mine|we|our)\b.{0,80}\b(?:prefer|like|love|hate|want|need|always|never|usually|"
    r"favou?rite|name|live|work|job|study|family|kids?|wife|husband|partner|allergic|vegan|vegetarian|hobby|"
    r"moved|born|from|learning|building|planning|goal)\b",
    re.I,
)
_CODE_HINTS = re.compile(
    r"\b(?:root cause|caused by|fixed|the fix|workaround|regression|race|deadlock|leak|decided|decision|"
    r"trade-?off|instead of|edge case|returns|raises|throws|timeout|off-by-one|null|None)\b",
    re.I,
)
