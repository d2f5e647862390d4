"""LoCoMo evaluation, the observation replay: a scripted-server script that answers extraction
requests with the dataset's own observations, and judgement requests with "keep both"."""

from __future__ import annotations

import json
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from dreamer.eval.locomo import DiaMap, Observation
from dreamer.llm.scripted.server import Reply

log = logging.getLogger(__name__)

DEFAULT_KIND = "profile"
_PREFERENCE = re.compile(r"\b(?:likes?|loves?|enjoys?|prefers?|favou?rite|hates?|dislikes?|fan of|passionate)\b", re.I)
_FOCUS = re.compile(
    r"\b(?:plans?|planning|wants? to|hopes?|goals?|working (?:on|towards?)|aims?|going to|will)\b", re.I
)
_PAIR = re.compile(r"^(\d+)\. .*\n-> ", re.M)  # a pair of a judgement prompt: "n. old" then "-> new"


def kind_of(text: str) -> str:
    """An agent-mode kind for an observation: preference, focus or profile."""
    if _PREFERENCE.search(text):
        return "preference"
    if _FOCUS.search(text):
        return "focus"
    return DEFAULT_KIND


def replay_answer(observations: Sequence[Observation], seqs_of: Callable[[Observation], list[int]]) -> dict[str, Any]:
    """The extraction answer for one session: its observations, evidence as message seqs, in a
    list per kind as the schema asks."""
    answer: dict[str, list[dict[str, Any]]] = {}
    for obs in observations:
        seqs = seqs_of(obs)
        if seqs:
            answer.setdefault(kind_of(obs.text), []).append({"text": obs.text, "seqs": seqs})
    return answer


def judgement_answer(user_prompt: str) -> dict[str, Any]:
    """LoCoMo observations are distinct facts: every ambiguous pair is judged new."""
    return {"new": [int(n) for n in _PAIR.findall(user_prompt)]}


class ObservationReplay:
    """A script for the ScriptedServer: extraction requests are answered with the observations
    resting on the turns the transcript shows, under the numbers it shows them with (a
    transcript may carry several sessions of the conversation, numbered on from one another);
    judgement requests with ``new``.

    Each shown line is matched to a stored turn by its text (each session's texts are known), so
    the replay never depends on the order the pass takes sessions in or how it packs them."""

    def __init__(self, sessions: dict[str, tuple[list[tuple[int, str]], list[Observation]]], dmap: DiaMap) -> None:
        self.sessions = sessions  # external_id -> ((seq, turn text) in seq order, observations)
        self.dmap = dmap
        self.unmatched = 0
        self._turns: dict[str, list[tuple[str, int]]] = defaultdict(list)  # shown text -> (external_id, seq)
        for external_id, (turns, _) in sessions.items():
            for seq, text in turns:
                self._turns[_flat(text)].append((external_id, seq))

    def __call__(self, body: dict[str, Any]) -> Reply:
        _, user = _messages(body)
        if is_judgement(body, user):
            return Reply(content=_compact(judgement_answer(user)))
        shown = self.numbering(user)
        if not shown:
            self.unmatched += 1
            log.warning("extraction request matches no session; answered with no memories")
            return Reply(content=_compact({}))
        answer: dict[str, list[dict[str, Any]]] = {}
        for external_id in dict.fromkeys(eid for eid, _ in shown):
            numbers = partial(self._numbers, shown, external_id)
            for kind, items in replay_answer(self.sessions[external_id][1], numbers).items():
                answer.setdefault(kind, []).extend(items)
        return Reply(content=_compact(answer))

    def _numbers(self, shown: dict[tuple[str, int], int], external_id: str, obs: Observation) -> list[int]:
        """The numbers the transcript shows an observation's evidence under (those it shows)."""
        seqs = self.dmap.seqs(obs.dia_ids, external_id)
        return sorted(shown[(external_id, seq)] for seq in seqs if (external_id, seq) in shown)

    def numbering(self, transcript: str) -> dict[tuple[str, int], int]:
        """(external_id, seq) of each turn the transcript shows -> the number it shows it under.
        A text several turns share ("Hi!") goes to the session of the line before it, at a later
        seq; else to the session of the next line only one session has; else to the session most
        of the transcript's lines could belong to."""
        shown = [(number, self._turns.get(_flat(text), [])) for number, text in shown_lines(transcript)]
        presence = Counter(eid for _, options in shown for eid in {e for e, _ in options})
        ahead = _next_single([options for _, options in shown])
        out: dict[tuple[str, int], int] = {}
        last: tuple[str, int] | None = None
        for k, (number, options) in enumerate(shown):
            free = [t for t in options if t not in out]
            if not free:
                continue
            same = [t for t in free if last is not None and t[0] == last[0] and t[1] > last[1]]
            following = [t for t in free if t[0] == ahead[k]]
            last = (same or following or [max(free, key=lambda t: presence[t[0]])])[0]
            out[last] = number
        return out


def _next_single(options: list[list[tuple[str, int]]]) -> list[str | None]:
    """For each line, the session of the first line after it whose text only one session has."""
    out: list[str | None] = [None] * len(options)
    nearest: str | None = None
    for k in range(len(options) - 1, -1, -1):
        out[k] = nearest
        sessions = {eid for eid, _ in options[k]}
        if len(sessions) == 1:
            nearest = next(iter(sessions))
    return out


_SHOWN = re.compile(r"^\[(\d+)\] .*?: (.*)$")  # "[n] speaker: text" or "[n] speaker (context): text"


def shown_lines(transcript: str) -> list[tuple[int, str]]:
    """(number, text) of each line of a rendered transcript, continuation lines joined."""
    out: list[tuple[int, str]] = []
    for raw in transcript.splitlines():
        m = _SHOWN.match(raw)
        if m:
            out.append((int(m.group(1)), m.group(2)))
        elif out and raw.startswith("    "):
            out[-1] = (out[-1][0], f"{out[-1][1]}\n{raw[4:]}")
    return out


def _flat(text: str) -> str:
    return " ".join(text.split())


def is_judgement(body: dict[str, Any], user: str) -> bool:
    """A consolidation judgement rather than an extraction: by the schema's name, or its pairs."""
    fmt = body.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name") if isinstance(fmt, dict) else None
    if name is not None:
        return bool(name == "judgements")
    return _PAIR.search(user) is not None


def _messages(body: dict[str, Any]) -> tuple[str, str]:
    system = user = ""
    for m in body.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, str):
            continue
        if m.get("role") == "system":
            system = content
        elif m.get("role") == "user":
            user = content
    return system, user


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
