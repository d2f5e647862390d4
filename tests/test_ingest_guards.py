"""Ids that no store can hold are refused up front, and calendar edges do not crash an import."""

from __future__ import annotations

import pytest

from dreamer.errors import IngestError
from dreamer.ingest.base import parse_timestamp, project_name
from dreamer.ingest.store import record_messages

MSG = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("field", ["user_id", "agent_id", "project", "team", "external_id"])
@pytest.mark.parametrize("value", ["a\x00b", "\ud800x"])
def test_ids_with_nul_or_lone_surrogates_are_refused_on_every_store(engine, field, value):
    kwargs = {"user_id": "u", field: value}
    external = kwargs.pop("external_id", "s1")
    with pytest.raises(IngestError, match=field):
        record_messages(engine, external, MSG, **kwargs)


@pytest.mark.parametrize("value", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", "9999-12-31001-2300"])
def test_timestamps_past_the_calendar_are_unreadable_not_fatal(value):
    assert parse_timestamp(value) is None


def test_project_names_are_cleaned():
    assert project_name("/srv/a\x00b") == "a\ufffdb"
