"""Which paths ingest reads: regular files under UTF-8 names, the others refused before anything is
opened or stored."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import func, select

from dreamer.core.errors import IngestError
from dreamer.core.models import Session
from dreamer.ingest.base import check_readable
from dreamer.ingest.detect import parse_path
from dreamer.ingest.files import ingest_file
from dreamer.store.db import session_scope


@contextmanager
def fifo_with_a_writer(path: Path):
    """A FIFO whose write end is open, so opening it to read would not block."""
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        yield path
    finally:
        os.close(writer)
        os.close(reader)


def sessions(engine) -> int:
    with session_scope(engine) as s:
        return s.exec(select(func.count()).select_from(Session)).scalar_one()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_only_a_regular_file_is_readable(tmp_path):
    with fifo_with_a_writer(tmp_path / "pipe.jsonl") as fifo:
        with pytest.raises(IngestError) as caught:
            check_readable(fifo)
    assert str(caught.value) == f"cannot read {fifo}: it is a FIFO"
    with pytest.raises(IngestError) as caught:
        check_readable(Path(os.devnull))
    assert str(caught.value) == f"cannot read {os.devnull}: it is a character device"
    with pytest.raises(IngestError) as caught:
        check_readable(tmp_path)
    assert str(caught.value) == f"cannot read {tmp_path}: it is a directory"


@pytest.mark.parametrize("fmt", ["auto", "openai", "locomo"])
def test_a_device_is_neither_parsed_nor_ingested(engine, fmt):
    refused = f"cannot read {os.devnull}: it is a character device"
    with pytest.raises(IngestError) as caught:
        parse_path(Path(os.devnull), fmt)
    assert str(caught.value) == refused
    with pytest.raises(IngestError) as caught:
        ingest_file(engine, Path(os.devnull), fmt=fmt, user_id="u")
    assert str(caught.value) == refused
    assert sessions(engine) == 0


def test_a_file_name_that_is_not_utf8_is_named_and_refused(engine, tmp_path):
    path = tmp_path / os.fsdecode(b"chat-\xff.jsonl")
    path.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    refused = f"cannot import {tmp_path}/chat-\\xff.jsonl: its name is not valid UTF-8 (rename the file)"
    with pytest.raises(IngestError) as caught:
        check_readable(path)
    assert str(caught.value) == refused
    with pytest.raises(IngestError) as caught:
        ingest_file(engine, path, user_id="u")
    assert str(caught.value) == refused
    assert sessions(engine) == 0


def test_many_rejections_of_one_file_are_summarised(engine, tmp_path):
    path = tmp_path / "noise.jsonl"
    path.write_bytes(b'{"role": "user", "content": "hi"}\n' + b"\x00 not json\n" * 24 + b"\xff\xfe\n")
    report = ingest_file(engine, path, user_id="u")
    assert (report.added, len(report.rejections)) == (1, 25)
    assert report.rejection_lines(shown=3) == [
        f"rejected {path}:2: invalid JSON: Expecting value at column 1",
        f"rejected {path}:3: invalid JSON: Expecting value at column 1",
        f"rejected {path}:4: invalid JSON: Expecting value at column 1",
        f"{path}: and 22 more rejected",
    ]
    assert len(report.rejection_lines()) == 11
    assert report.rejection_lines(shown=25)[-1] == f"rejected {path}:26: not valid UTF-8 (byte offset 0)"
    assert len(report.rejection_lines(shown=25)) == 25
