"""What is learnt of a model at an endpoint, kept in the store (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from dreamer.store import endpoints

URL, MODEL = "http://127.0.0.1:8080/v1", "smollm2"


def test_a_record_is_made_then_updated_fact_by_fact(engine):
    assert endpoints.learnt(engine, URL, MODEL) is None
    endpoints.remember(engine, URL, MODEL, mode="json_object_schema")
    endpoints.remember(engine, URL, MODEL, context_window=4096, window_source="overflow probe")
    row = endpoints.learnt(engine, URL, MODEL)
    assert row is not None
    assert (row.mode, row.context_window, row.window_source) == ("json_object_schema", 4096, "overflow probe")
    assert endpoints.learnt(engine, URL, "another-model") is None


def test_an_unknown_fact_is_refused_and_nothing_is_written(engine):
    with pytest.raises(ValueError, match="no endpoint fact 'colour'"):
        endpoints.remember(engine, URL, MODEL, colour="blue")
    assert endpoints.learnt(engine, URL, MODEL) is None
