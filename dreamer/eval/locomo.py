"""LoCoMo evaluation, the pure parts: reading conversations and questions, the dia_id <-> seq
mapping and the scoring (`dreamer.eval.locomo_replay` answers the extraction requests).

Nothing here touches SQL, the index or the network; `dreamer.eval.harness` runs the pipeline.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from dreamer.core.errors import IngestError, NotFound
from dreamer.ingest.base import LineRejected, optional_text, read_bytes
from dreamer.ingest.locomo import load_document, session_numbers

CATEGORIES = (1, 2, 3, 4)
_OBSERVATION_KEY = re.compile(r"session_(\d+)_observation")


# --------------------------------------------------------------------------- the data


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]  # dia_ids of real turns, sorted, distinct


@dataclass(frozen=True)
class Observation:
    session: int
    speaker: str
    text: str
    dia_ids: tuple[str, ...]


@dataclass
class Conversation:
    sample_id: str
    raw: dict[str, Any]
    turn_ids: set[str] = field(default_factory=set)
    questions: list[Question] = field(default_factory=list)
    observations: dict[int, list[Observation]] = field(default_factory=dict)


def session_external_id(sample_id: str, number: int) -> str:
    """The importer's session id for ``session_<number>`` of a conversation."""
    return f"{sample_id}:session_{number}"


def load_conversations(path: Path, only: Sequence[str] | None = None) -> list[Conversation]:
    """Every conversation of a LoCoMo-format file (or those whose sample_id is in `only`).

    The whole file is checked before anything runs: a conversation the harness cannot read (no
    usable sample_id, no two speakers, a qa or observation block of the wrong type) refuses the
    file (`IngestError` naming it); absent or never-scored parts are skipped, and a session the
    importer rejects is reported by it. An unknown sample_id in `only` is `NotFound`; a selection
    without a single scorable question is refused.
    """
    path = Path(path)
    items = read_document(path)
    for index, item in enumerate(items, start=1):
        problem = entry_problem(item)
        if problem is not None:
            raise IngestError(f"{path}: conversation {index}{_label(item)}: {problem}")
    conversations = [conversation_of(item) for item in items]
    _check_distinct(path, [c.sample_id for c in conversations])
    chosen = select(path, conversations, only)
    if not any(c.questions for c in chosen):
        raise IngestError(
            f"{path}: no question to score (category 1-4, evidence naming a turn) "
            f"in {', '.join(c.sample_id for c in chosen)}"
        )
    return chosen


def read_document(path: Path, entry: str = "conversation") -> list[Any]:
    """The file's list of entries; unreadable, empty, not JSON or no entry at all is `IngestError`
    (naming what an `entry` is: a conversation, a profile)."""
    data = read_bytes(path)
    if not data.strip():
        raise IngestError(f"{path}: the file is empty")
    try:
        items = load_document(data)
    except LineRejected as exc:
        raise IngestError(f"{path}: {exc}") from exc
    if not items:
        raise IngestError(f"{path}: no {entry} in the file")
    return items


def select(path: Path, conversations: list[Conversation], only: Sequence[str] | None) -> list[Conversation]:
    """The conversations named in `only` (all when `only` is empty), in file order."""
    if not only:
        return conversations
    known = [c.sample_id for c in conversations]
    missing = sorted(set(only) - set(known))
    if missing:
        raise NotFound(f"{path}: no conversation {', '.join(missing)} (the file holds {', '.join(known)})")
    wanted = set(only)
    return [c for c in conversations if c.sample_id in wanted]


def _check_distinct(path: Path, sample_ids: list[str]) -> None:
    seen: set[str] = set()
    for sample_id in sample_ids:
        if sample_id in seen:
            raise IngestError(f"{path}: sample_id {sample_id!r} appears twice")
        seen.add(sample_id)


def _label(item: Any) -> str:
    sample_id = read_sample_id(item)[0] if isinstance(item, dict) else None
    return f" ({sample_id})" if sample_id else ""


def read_sample_id(item: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the sample_id exactly as the LoCoMo importer stores it as the user id, None) or
    (None, why the importer cannot take it)."""
    try:
        found = optional_text(item.get("sample_id"), "sample_id")
    except LineRejected as exc:
        return None, str(exc)
    return (found, None) if found else (None, "'sample_id' must be a non-empty string")


def entry_problem(item: Any) -> str | None:
    """What makes one entry unusable by the harness, or None: the shape the importer needs, and
    every block the harness reads holding the type it reads."""
    if not isinstance(item, dict) or not isinstance(item.get("conversation"), dict):
        return "expected an object with a 'conversation' object"
    if (problem := read_sample_id(item)[1]) is not None:
        return problem
    return (
        _body_problem(item["conversation"])
        or _qa_problem(item.get("qa"))
        or _observation_problem(item.get("observation"))
    )


def _body_problem(body: dict[str, Any]) -> str | None:
    speaker_a, speaker_b = body.get("speaker_a"), body.get("speaker_b")
    if not (isinstance(speaker_a, str) and isinstance(speaker_b, str) and speaker_a and speaker_a != speaker_b):
        return "'speaker_a' and 'speaker_b' must be two distinct names"
    return None  # a session that is not a list of turns is the importer's to reject, as it is for ingest


def _qa_problem(qa: Any) -> str | None:
    if not qa:  # absent, null or empty: nothing to ask
        return None
    if not isinstance(qa, list):
        return "'qa' must be a list of questions"
    for number, q in enumerate(qa, start=1):
        if not isinstance(q, dict):
            return f"qa item {number} must be an object"
        if q.get("category") not in CATEGORIES:
            continue  # never scored (category 5 and others): its shape does not matter
        if not isinstance(q.get("evidence") or [], list):
            return f"qa item {number}: 'evidence' must be a list of dia_ids"
        if not isinstance(q.get("question"), str):
            return f"qa item {number}: 'question' must be a string"
    return None


def _observation_problem(block: Any) -> str | None:
    if not block:  # absent, null or empty: nothing to replay
        return None
    if not isinstance(block, dict):
        return "'observation' must be an object"
    for key, per_speaker in block.items():
        if _OBSERVATION_KEY.fullmatch(key) is None:
            continue
        if not isinstance(per_speaker or {}, dict):
            return f"'observation' {key} must be an object of speakers"
        for speaker, entries in (per_speaker or {}).items():
            if not isinstance(entries or [], list):
                return f"'observation' {key} {speaker}: expected a list of observations"
    return None


def conversation_of(item: dict[str, Any]) -> Conversation:
    """One entry that passed `entry_problem`."""
    conv = Conversation(sample_id=read_sample_id(item)[0] or "", raw=item)
    body = item["conversation"]
    for number in session_numbers(body):
        turns = body.get(f"session_{number}")
        for turn in turns if isinstance(turns, list) else []:
            if isinstance(turn, dict) and isinstance(turn.get("dia_id"), str):
                conv.turn_ids.add(turn["dia_id"])
    conv.questions = questions_of(item.get("qa") or [], conv.turn_ids)
    conv.observations = observations_of(item.get("observation") or {}, conv.turn_ids)
    return conv


def questions_of(qa: Iterable[Any], turn_ids: set[str]) -> list[Question]:
    """Categories 1-4 whose evidence names at least one real turn; malformed ids are dropped."""
    out = []
    for q in qa:
        if not isinstance(q, dict) or q.get("category") not in CATEGORIES or not isinstance(q.get("question"), str):
            continue
        evidence = tuple(sorted({e for e in q.get("evidence") or [] if isinstance(e, str) and e in turn_ids}))
        if evidence:
            out.append(Question(q["question"], int(q["category"]), evidence))
    return out


def observations_of(block: dict[str, Any], turn_ids: set[str]) -> dict[int, list[Observation]]:
    """``session_N_observation`` -> {speaker: [[text, dia_id or [dia_ids]], ...]} as observations."""
    out: dict[int, list[Observation]] = {}
    for key, per_speaker in block.items():
        match = _OBSERVATION_KEY.fullmatch(key)
        if match is None or not isinstance(per_speaker, dict):
            continue
        items = out.setdefault(int(match.group(1)), [])
        for speaker, entries in per_speaker.items():
            for entry in entries or []:
                obs = _observation(int(match.group(1)), str(speaker), entry, turn_ids)
                if obs is not None:
                    items.append(obs)
    return out


def _observation(session: int, speaker: str, entry: Any, turn_ids: set[str]) -> Observation | None:
    if not isinstance(entry, (list, tuple)) or len(entry) < 2 or not isinstance(entry[0], str):
        return None
    ids = entry[1] if isinstance(entry[1], list) else [entry[1]]
    return Observation(session, speaker, entry[0], tuple(i for i in ids if isinstance(i, str) and i in turn_ids))


# --------------------------------------------------------------------------- dia_id <-> seq


@dataclass
class DiaMap:
    """Where each turn was stored: dia_id <-> (session external id, message seq)."""

    to_seq: dict[str, tuple[str, int]] = field(default_factory=dict)
    to_dia: dict[tuple[str, int], str] = field(default_factory=dict)

    def add(self, dia_id: str, external_id: str, seq: int) -> None:
        self.to_seq[dia_id] = (external_id, seq)
        self.to_dia[(external_id, seq)] = dia_id

    def seqs(self, dia_ids: Iterable[str], external_id: str) -> list[int]:
        """The seqs of those dia_ids stored in `external_id`, sorted."""
        out = set()
        for dia_id in dia_ids:
            where = self.to_seq.get(dia_id)
            if where is not None and where[0] == external_id:
                out.add(where[1])
        return sorted(out)

    def dia_ids(self, evidence: Iterable[dict[str, Any]]) -> set[str]:
        """The dia_ids a memory's evidence (``[{external_id, seqs}]``) points at."""
        out = set()
        for e in evidence:
            external_id = e.get("external_id")
            if not isinstance(external_id, str):
                continue  # no turn is keyed by it
            for seq in e.get("seqs") or []:
                dia = self.to_dia.get((external_id, int(seq)))
                if dia is not None:
                    out.add(dia)
        return out


# --------------------------------------------------------------------------- scoring


def recall_at_k(gold: Iterable[str], retrieved: Sequence[Iterable[str]], k: int) -> float:
    """The share of the gold evidence found in the evidence of the top k retrieved memories."""
    want = set(gold)
    if not want:
        raise ValueError("a question needs gold evidence")
    found = set().union(*[set(r) for r in retrieved[:k]]) if k > 0 else set()
    return len(want & found) / len(want)


def hit_at_k(gold: Iterable[str], retrieved: Sequence[Iterable[str]], k: int) -> float:
    """1.0 when the top k retrieved memories cover at least one gold evidence turn."""
    return 1.0 if recall_at_k(gold, retrieved, k) > 0 else 0.0


def ceiling(gold: Iterable[str], covered: Iterable[str]) -> float:
    """The share of the gold evidence that the evidence of all stored memories covers."""
    want = set(gold)
    if not want:
        raise ValueError("a question needs gold evidence")
    return len(want & set(covered)) / len(want)


@dataclass(frozen=True)
class Scored:
    """One question's outcome."""

    category: int
    recall: dict[int, float]
    hit: dict[int, float]
    ceiling: float


def score_question(
    question: Question, retrieved: Sequence[Iterable[str]], covered: Iterable[str], ks: Sequence[int]
) -> Scored:
    return Scored(
        question.category,
        {k: recall_at_k(question.evidence, retrieved, k) for k in ks},
        {k: hit_at_k(question.evidence, retrieved, k) for k in ks},
        ceiling(question.evidence, covered),
    )


def _means(rows: Sequence[Scored], ks: Sequence[int]) -> dict[str, Any]:
    return {
        "n_questions": len(rows),
        "recall_at": {str(k): _mean(r.recall[k] for r in rows) for k in ks},
        "hit_at": {str(k): _mean(r.hit[k] for r in rows) for k in ks},
        "evidence_ceiling": _mean(r.ceiling for r in rows),
    }


def aggregate(rows: Sequence[Scored], ks: Sequence[int]) -> dict[str, Any]:
    """n_questions, recall_at, hit_at, evidence_ceiling and the same by category (keys "1".."4")."""
    out = _means(rows, ks)
    groups: dict[int, list[Scored]] = defaultdict(list)
    for r in rows:
        groups[r.category].append(r)
    out["by_category"] = {str(c): _means(groups[c], ks) for c in sorted(groups)}
    return out


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return round(fmean(values), 4) if values else 0.0
