"""What the index holds for a memory besides its own text.

A memory is searched by more than its one sentence: its BM25 document also carries the day its
evidence was said and the messages it rests on, each with a few neighbours, attributed to their
speakers ("Caroline: ..."), so a question phrased like the conversation finds the memory that
came from it. The payload carries the evidence's speakers for the speaker match at recall, the
evidence messages themselves ("session:seq") so recall can tell a repeat of what a
better-ranked memory already rests on, and the days they were said on, for a query that names a
date.
The index also keeps the vectors of the evidence messages themselves beside the memory's own
(`said`), so recall can see that a question matches what was said even when the memory's
sentence is about something else. The memory itself (its text, its dense vector, what recall
returns) is unchanged.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from dreamer.core.days import day_words, local_day
from dreamer.core.models import Memory, Message
from dreamer.core.secrets.redact import clean_for_model
from dreamer.core.settings import Settings
from dreamer.embed.embedders import Embedder
from dreamer.index.contract import IndexPoint, MemoryIndex

log = logging.getLogger(__name__)

SPEAKERS_FIELD = "speakers"
EVIDENCE_FIELD = "evidence_at"
DAYS_FIELD = "said_on"
_EVIDENCE_KEY = re.compile(r"(-?[0-9]+):([0-9]+)")  # "session:seq"


@dataclass(frozen=True)
class Said:
    """One ledger message as a document shows it."""

    session_id: int
    seq: int
    speaker: str | None
    text: str
    at: datetime | None


@dataclass(frozen=True)
class Document:
    text: str
    speakers: tuple[str, ...]
    evidence: tuple[str, ...] = ()
    days: tuple[str, ...] = ()  # ISO days the evidence was said on, sorted
    said: tuple[str, ...] = ()  # the evidence messages' own texts, in order


# --------------------------------------------------------------------------- pure rendering


def evidence_points(evidence: Iterable[dict[str, Any]] | None) -> set[tuple[int, int]]:
    """(session_id, seq) of every message a memory's evidence names."""
    out: set[tuple[int, int]] = set()
    for e in evidence or []:
        sid = e.get("session_id")
        if sid is None:
            continue
        out.update((int(sid), int(seq)) for seq in e.get("seqs") or [])
    return out


def key_points(keys: Iterable[object]) -> list[tuple[int, int]]:
    """(session_id, seq) of each "session:seq" key, as `evidence_keys` writes them; anything
    else (a point written by another version) is skipped."""
    found = (_EVIDENCE_KEY.fullmatch(key) for key in keys if isinstance(key, str))
    return [(int(m.group(1)), int(m.group(2))) for m in found if m]


def evidence_keys(points: Iterable[tuple[int, int]]) -> tuple[str, ...]:
    """Evidence messages as payload keys, "session:seq", sorted."""
    return tuple(f"{sid}:{seq}" for sid, seq in sorted(set(points)))


def windows(points: set[tuple[int, int]], radius: int) -> dict[int, set[int]]:
    """The seqs to show per session: each evidence message and `radius` neighbours each side."""
    out: dict[int, set[int]] = defaultdict(set)
    for sid, seq in points:
        out[sid].update(s for s in range(seq - radius, seq + radius + 1) if s >= 1)
    return dict(out)


def speakers_of(lines: Sequence[Said], points: set[tuple[int, int]]) -> tuple[str, ...]:
    """Who said the evidence messages (named speakers only), in order of first appearance."""
    names = (ln.speaker for ln in lines if (ln.session_id, ln.seq) in points and ln.speaker)
    return tuple(dict.fromkeys(names))


def said_at(lines: Sequence[Said], points: set[tuple[int, int]]) -> list[datetime]:
    """When the evidence messages among `lines` were said (those with a time)."""
    return [ln.at for ln in lines if (ln.session_id, ln.seq) in points and ln.at is not None]


def said_on(lines: Sequence[Said], points: set[tuple[int, int]], tz: tzinfo = UTC) -> tuple[str, ...]:
    """The distinct days (ISO, in `tz`) the evidence messages were said on, sorted."""
    return tuple(sorted({local_day(at, tz).isoformat() for at in said_at(lines, points)}))


def render(memory_text: str, lines: Sequence[Said], points: set[tuple[int, int]], tz: tzinfo = UTC) -> str:
    """Day of the evidence (in `tz`), the memory text, then the context lines (the memory's own line once)."""
    dated = said_at(lines, points)
    head = [day_words(local_day(min(dated), tz))] if dated else []
    body = [f"{ln.speaker}: {ln.text}" if ln.speaker else ln.text for ln in lines]
    return "\n".join(head + [memory_text] + [b for b in body if b != memory_text])


def document(
    memory_text: str, evidence: Iterable[dict[str, Any]] | None, lines: Sequence[Said], tz: tzinfo = UTC
) -> Document:
    points = evidence_points(evidence)
    ordered = sorted(lines, key=lambda ln: (ln.session_id, ln.seq))
    said = tuple(ln.text for ln in ordered if (ln.session_id, ln.seq) in points and ln.text)
    return Document(
        render(memory_text, ordered, points, tz),
        speakers_of(ordered, points),
        evidence_keys(points),
        said_on(ordered, points, tz),
        said,
    )


# --------------------------------------------------------------------------- reading the ledger


def load_lines(engine: Engine, wanted: dict[int, set[int]], *, max_chars: int) -> dict[int, list[Said]]:
    """The wanted messages per session, cleaned for storage (injected blocks out, secrets redacted)."""
    if not wanted:
        return {}
    out: dict[int, list[Said]] = defaultdict(list)
    with engine.connect() as conn:
        for sid, seqs in wanted.items():
            rows = conn.execute(
                select(Message.seq, Message.name, Message.content, Message.created_at)
                .where(Message.session_id == sid)
                .where(Message.seq >= min(seqs))
                .where(Message.seq <= max(seqs))
                .order_by(col(Message.seq))
            ).all()
            out[sid] = [
                Said(sid, seq, name, clean_for_model(content[:max_chars]), at)
                for seq, name, content, at in rows
                if seq in seqs
            ]
    return dict(out)


def build_documents(
    engine: Engine,
    memory_ids: Sequence[str],
    *,
    radius: int,
    max_chars: int,
    tz: tzinfo = UTC,
) -> dict[str, Document]:
    """The index document of each memory (one query for the memories, one per evidence session)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(Memory.id, Memory.text, Memory.evidence).where(col(Memory.id).in_(list(memory_ids)))
        ).all()
    wanted: dict[int, set[int]] = defaultdict(set)
    for _, _, evidence in rows:
        for sid, seqs in windows(evidence_points(evidence), radius).items():
            wanted[sid] |= seqs
    lines = load_lines(engine, wanted, max_chars=max_chars)
    docs = {}
    for mid, text, evidence in rows:
        mine = windows(evidence_points(evidence), radius)
        shown = [ln for sid, seqs in mine.items() for ln in lines.get(sid, []) if ln.seq in seqs]
        docs[mid] = document(text, evidence, shown, tz)
    return docs


# --------------------------------------------------------------------------- the index wrapper


def with_document(point: IndexPoint, doc: Document | None, vectors: dict[str, list[float]] | None = None) -> IndexPoint:
    """The point with its document, payload fields and (a dense point, given `vectors` by text)
    the vectors of the messages it rests on."""
    if doc is None:
        return point
    payload = dict(point.payload)
    payload[SPEAKERS_FIELD] = list(doc.speakers)
    payload[EVIDENCE_FIELD] = list(doc.evidence)
    payload[DAYS_FIELD] = list(doc.days)
    said = [vectors[t] for t in doc.said if t in vectors] if vectors and point.vector is not None else []
    return IndexPoint(point.memory_id, point.text, point.vector, payload, document=doc.text, said=said)


class DocumentedIndex:
    """A `MemoryIndex` that indexes each upserted memory with its document and speakers.

    Everything but `upsert` is the inner index's own."""

    def __init__(
        self,
        inner: MemoryIndex,
        engine: Engine,
        *,
        radius: int = 2,
        max_chars: int = 600,
        tz: tzinfo = UTC,
        embedder: Embedder | None = None,
    ) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.engine = engine
        self.radius = radius
        self.max_chars = max_chars
        self.tz = tz
        self.embedder = embedder  # embeds the evidence messages of dense points (None: they get no message vectors)

    @classmethod
    def from_settings(
        cls, inner: MemoryIndex, engine: Engine, settings: Settings, embedder: Embedder | None = None
    ) -> DocumentedIndex:
        return cls(
            inner,
            engine,
            radius=settings.context_radius,
            max_chars=settings.context_line_chars,
            tz=settings.tz,
            embedder=embedder,
        )

    def upsert(self, points: list[IndexPoint]) -> None:
        if not points:
            return
        docs = build_documents(
            self.engine, [p.memory_id for p in points], radius=self.radius, max_chars=self.max_chars, tz=self.tz
        )
        vectors = self._said_vectors(
            [docs[p.memory_id] for p in points if p.vector is not None and p.memory_id in docs]
        )
        self.inner.upsert([with_document(p, docs.get(p.memory_id), vectors) for p in points])

    def _said_vectors(self, docs: list[Document]) -> dict[str, list[float]]:
        """Each distinct evidence message text of these documents, embedded (in one call)."""
        texts = list(dict.fromkeys(t for d in docs for t in d.said))
        if self.embedder is None or not texts:
            return {}
        return dict(zip(texts, self.embedder.embed(texts)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
