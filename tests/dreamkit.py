"""Test helpers: a scripted model that extracts "I prefer ..." statements, and a runtime
built from real local parts (store, scripted OpenAI-compatible server, Qdrant index)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from qdrant_client import QdrantClient

from dreamer.embed.embedders import CachedEmbedder, OpenAIEmbedder
from dreamer.engine.consolidation.judge import JUDGE_SYSTEM
from dreamer.engine.runtime import Runtime
from dreamer.index.edge import EdgeIndex
from dreamer.index.server import QdrantClientIndex
from dreamer.llm.client import OpenAILLM, build_openai_client
from dreamer.llm.scripted.screen import is_screen_request
from dreamer.llm.scripted.server import Reply
from dreamer.store.busy import AlwaysIdle

LINE = re.compile(r"^\[(\d+)\] (\w+)(?::[^ :]+)?( \(context\))?: (.*)$")
PREFER = re.compile(r"\bI prefer ([^.!?\n]+)", re.I)
PAIR = re.compile(r"^(\d+)\. .*\n-> ", re.M)
EMBED_DIM = 64


def transcript_lines(body: dict) -> list[tuple[int, str, bool, str]]:
    """(seq, role, context_only, text) of each transcript line in an extraction request."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    out = []
    for raw in user.splitlines():
        m = LINE.match(raw)
        if m:
            out.append((int(m.group(1)), m.group(2), bool(m.group(3)), m.group(4)))
    return out


def is_judgement(body: dict) -> bool:
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    return system.startswith(JUDGE_SYSTEM)


def judge_reply(body: dict, verdict: str) -> Reply:
    """Every pair of a judgement request filed under `verdict`."""
    user = body["messages"][-1]["content"]
    return Reply.json({verdict: [int(n) for n in PAIR.findall(user)]})


def extraction_script(verdict: str = "new"):
    """A model stand-in: every new 'I prefer X' line becomes a preference; judgements answer `verdict`."""

    def script(body: dict) -> Reply:
        if is_judgement(body):
            return judge_reply(body, verdict)
        preferences = []
        for seq, role, context, text in transcript_lines(body):
            m = PREFER.search(text)
            if m and role == "user" and not context:
                preferences.append(
                    {"text": f"The user prefers {m.group(1).strip()}.", "importance": 0.6, "seqs": [seq], "tags": []}
                )
        return Reply.json({"preference": preferences})

    return script


JUDGED_PAIR = re.compile(r"^(\d+)\. (.*)\n-> (.*)$", re.M)


def judged_by_word(word: str):
    """Extraction as `extraction_script`; a judged pair contradicts when only its new side says `word`."""
    extract = extraction_script()

    def script(body: dict) -> Reply:
        if not is_judgement(body):
            return extract(body)
        pairs = JUDGED_PAIR.findall(body["messages"][-1]["content"])
        verdicts: dict[str, list[int]] = {"contradicts": [], "new": []}
        for n, old, new in pairs:
            verdicts["contradicts" if word in new and word not in old else "new"].append(int(n))
        return Reply.json(verdicts)

    return script


class ManualClock:
    """A monotonic clock that moves only when the test moves `now`."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_index(backend: str, tmp_path: Path, dim: int = EMBED_DIM):
    if backend == "edge":
        return EdgeIndex(tmp_path / "edge", dim)
    return QdrantClientIndex(QdrantClient(path=str(tmp_path / "qdrant-local")), collection="memories", dim=dim)


def make_runtime(settings, engine, server, index, *, llm: bool = True, embed: bool = True, **parts) -> Runtime:
    settings = settings.model_copy(update={"llm_base_url": server.url if llm else "", "embed_dim": EMBED_DIM})
    client = build_openai_client(settings.model_copy(update={"llm_base_url": server.url}))
    model = (
        OpenAILLM(client, model="scripted", max_retries=2, retry_base=0.01, retry_cap=0.02, sleep=lambda s: None)
        if llm
        else None
    )
    embedder = CachedEmbedder(OpenAIEmbedder(client, model="scripted-embed", dim=EMBED_DIM)) if embed else None
    return Runtime.open(
        settings, engine=engine, llm=model, embedder=embedder, index=index, **{"busy": AlwaysIdle(), **parts}
    )


def chat_bodies(server) -> list[dict]:
    return [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]


def dumps(obj) -> str:
    return json.dumps(obj, default=str)


def extraction_bodies(server) -> list[dict]:
    """The chat requests that were extractions (not consolidation judgements, not screens)."""
    return [b for b in chat_bodies(server) if not is_judgement(b) and not is_screen_request(b)]


JUDGED = {"ambiguous_low": 0.3, "route_max_pairs": 1, "dup_threshold": 0.99}  # a pair routed to the judge at once


def judged_runtime(settings, engine, server, folder: Path, **overrides) -> Runtime:
    """A runtime whose candidates go to the scripted judge, which answers by `judged_by_word("coffee")`."""
    server.set_script(judged_by_word("coffee"))
    st = settings.model_copy(update={**JUDGED, **overrides})
    return make_runtime(st, engine, server, make_index("edge", folder))


def user_turns(*user_lines: str) -> list[dict]:
    """A session of these user lines (padded to four rounds), each answered by the assistant."""
    lines = list(user_lines) + ["ok", "sure", "fine", "thanks"][: max(0, 4 - len(user_lines))]
    return [
        m
        for i, line in enumerate(lines)
        for m in ({"role": "user", "content": line}, {"role": "assistant", "content": f"reply {i}"})
    ]


FINDING = re.compile(r"^(Cause|Behaviour|Decision|Guess|Fails): (.+?)(?: \(only when (.+)\))?$")
FINDING_KINDS = {"Cause": "root_cause", "Behaviour": "interface_behavior", "Decision": "design_decision"}
LESSON_ROW = re.compile(r"^(L\d+): (.*)$", re.M)


def shown_lessons(body: dict) -> list[tuple[str, str]]:
    """(label, text) of each known lesson an extraction request shows before its transcript."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    block = user.split("<lessons>\n", 1)[1].split("\n</lessons>", 1)[0] if user.startswith("<lessons>") else ""
    return LESSON_ROW.findall(block)


def code_script():
    """A code-mode model stand-in, reading each new line as it is said: `Cause: s`, `Behaviour: s`,
    `Decision: s` become items of that kind (observed), `Guess: s` an inferred root cause, each
    with the conditions an `(only when c)` ending gives; `Fails: s` is a behaviour countering the
    shown lesson sharing most words with `s` (none shown: it counters nothing)."""

    def script(body: dict) -> Reply:
        if is_judgement(body):
            return judge_reply(body, "new")
        lessons = shown_lessons(body)
        answer: dict[str, list[dict]] = {"root_cause": [], "interface_behavior": [], "design_decision": []}
        for seq, _role, context, text in transcript_lines(body):
            m = FINDING.match(text)
            if not m or context:
                continue
            head, sentence, condition = m.groups()
            item = {"text": sentence, "seqs": [seq], "basis": "inferred" if head == "Guess" else "observed"}
            if condition:
                item["conditions"] = [condition]
            if head == "Fails" and lessons:
                words = set(sentence.lower().split())
                item["counters"] = max(lessons, key=lambda ls: len(words & set(ls[1].lower().split())))[0]
            answer[FINDING_KINDS.get(head, "root_cause" if head == "Guess" else "interface_behavior")].append(item)
        return Reply.json(answer)

    return script
