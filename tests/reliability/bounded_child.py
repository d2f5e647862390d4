"""Runs one bounded-resources scenario in a fresh process and prints its measurements as JSON:
peak resident memory of the ingest and of the dream pass (each measured from its own start,
the peak being reset in between), and what the pass did.

    python -m reliability.bounded_child <data_dir> <llm_url> <scenario> <input>
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> None:
    """Linux: writing 5 to clear_refs resets the peak resident set size (VmHWM)."""
    Path("/proc/self/clear_refs").write_text("5")


def main(data_dir: str, url: str, scenario: str, source: str) -> dict:
    from dreamer.core.settings import Settings
    from dreamer.engine.dream import dream_pass
    from dreamer.ingest.files import ingest_file
    from dreamer.ingest.store import record_messages
    from dreamer.store import db
    from reliability import kit

    settings = Settings(_env_file=None, data_dir=Path(data_dir), min_rounds=1)
    engine = db.make_engine(settings.resolved_database_url())
    db.upgrade(engine)
    out: dict = {"baseline_mib": rss_kib("VmRSS") // 1024}
    reset_peak()
    started = time.monotonic()
    if scenario == "tool-result-api":
        big = Path(source).read_text(encoding="utf-8")
        messages = [
            {"role": "user", "content": "I prefer short summaries of long logs."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": big},
            {"role": "user", "content": "thanks, I prefer the summary in bullets."},
        ]
        del big
        # a deployment that keeps large tool results raises the limit (the default refuses 5 MB)
        record_messages(engine, "big-tool", messages, user_id="u", max_message_bytes=16 * 2**20)
        out["ingest_rejections"] = []
    else:
        report = ingest_file(
            engine, Path(source), fmt="openai", user_id="u", max_message_bytes=settings.max_message_bytes
        )
        out["ingest_messages"] = report.added
        out["ingest_rejections"] = [str(r) for r in report.rejections][:3]
    out["ingest_seconds"] = round(time.monotonic() - started, 1)
    out["ingest_peak_mib"] = rss_kib("VmHWM") // 1024
    reset_peak()
    started = time.monotonic()
    with kit.runtime(settings, engine, _Endpoint(url), Path(settings.data_dir)) as rt:
        run = dream_pass(rt, force=True)
    out["pass_seconds"] = round(time.monotonic() - started, 1)
    out["pass_peak_mib"] = rss_kib("VmHWM") // 1024
    out["run"] = {
        "status": run.status,
        "sessions": run.sessions,
        "messages": run.messages,
        "llm_calls": run.llm_calls,
        "prompt_tokens": run.prompt_tokens,
    }
    return out


class _Endpoint:
    """The scripted server, as `kit.runtime` sees it: its URL (it runs in the test process)."""

    def __init__(self, url: str) -> None:
        self.url = url


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5])))
