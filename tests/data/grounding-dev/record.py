"""Record what a real model writes for each session of the grounding dev conversations, for
labelling by hand: labelled.json here is the recording with each item given `grounded` (all it
states was said in its session) and a `note`, and `dreamer eval grounding labelled.json` holds
the grounding contract to it.

Run with a model configured, as a pass would reach it:

    DREAMER_LLM_BASE_URL=http://127.0.0.1:8791/v1 DREAMER_LLM_MODEL=smollm2 \\
        python tests/data/grounding-dev/record.py tests/data/grounding-dev/recorded.json

Each session of every file here is imported into a fresh data dir and sent to the extraction
call alone, as a pass sends it; the lines the call showed and every item the model wrote (its
text and the lines it cites) are written out, before any check.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from sqlmodel import col, select

from dreamer.core.models import Session
from dreamer.core.settings import Settings
from dreamer.engine.endpoint import open_llm
from dreamer.engine.extraction.extract import LLMExtractor
from dreamer.engine.extraction.transcript import Chunk
from dreamer.engine.load import load_work
from dreamer.engine.runtime import Runtime
from dreamer.ingest.files import ingest_file
from dreamer.store import db
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope

HERE = Path(__file__).resolve().parent
# (files, format, mode): Claude Code transcripts are read both as code work and as an agent's chats
FILES = [
    ("locomo.json", "locomo", None),
    ("claude-*.jsonl", "claude-code", None),
    ("claude-*.jsonl", "claude-code", "agent"),
]


def record(settings: Settings, path: Path, fmt: str, mode: str | None) -> list[dict]:
    work = Path(tempfile.mkdtemp(prefix="grounding-dev-"))
    st = settings.model_copy(update={"data_dir": work, "database_url": "", "qdrant_url": "", "min_rounds": 0})
    engine = db.make_engine(st.resolved_database_url())
    db.upgrade(engine)
    ingest_file(engine, path, fmt=fmt, user_id="dev" if fmt != "locomo" else None, mode=mode)
    llm = open_llm(st, engine)
    assert llm is not None, "set DREAMER_LLM_BASE_URL"
    extractor = LLMExtractor(llm, limit=st.entries_per_session)
    out = []
    with Runtime.open(st, engine=engine, busy=AlwaysIdle()) as rt:
        with session_scope(engine) as s:
            sessions = list(s.exec(select(Session).order_by(col(Session.id))).all())
        for sess in sessions:
            loaded = load_work(rt, sess)
            if loaded is None:
                continue
            result = extractor.extract(Chunk(loaded.lines), sess.mode)
            lines = [
                {"seq": ln.seq, "speaker": ln.name or ln.role, "text": ln.text, "day": ln.day and ln.day.isoformat()}
                for ln in loaded.lines
            ]
            items = [{"text": c.text, "seqs": c.seqs} for c in [*result.candidates, *result.unanchored]]
            out.append(
                {"file": path.name, "session": sess.external_id, "mode": sess.mode, "lines": lines, "items": items}
            )
            print(f"{path.name} {sess.external_id}: {len(items)} item(s)", file=sys.stderr)
    return out


def main() -> None:
    settings = Settings()
    records = []
    for pattern, fmt, mode in FILES:
        for path in sorted(HERE.glob(pattern)):
            records += record(settings, path, fmt, mode)
            Path(sys.argv[1]).write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n")  # as it goes


if __name__ == "__main__":
    main()
