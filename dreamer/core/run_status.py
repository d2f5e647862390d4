"""A dream run's status: what the `dream_runs` row's `status` column holds, as an enum whose
values are the strings stored, shown by the CLI and answered by the API."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from sqlalchemy import String
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class RunStatus(StrEnum):
    """Where a pass is, or how it ended."""

    RUNNING = "running"  # under way (or its process died: the sweep marks it abandoned)
    OK = "ok"  # every due session done
    PARTIAL = "partial"  # done, but sessions failed or were left due (busy owner, another writer's lock)
    STOPPED = "stopped"  # ended before its last session: the agent became busy, the breaker or the budget
    FAILED = "failed"  # an error ended it
    SKIPPED_BUSY = "skipped_busy"  # never started: the agent was busy
    ABANDONED = "abandoned"  # its worker died while it ran


class RunStatusColumn(TypeDecorator[RunStatus]):
    """The column: the enum's value as a string (as before it was an enum), read back as the enum."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else RunStatus(value).value

    def process_result_value(self, value: Any, dialect: Dialect) -> RunStatus | None:
        return None if value is None else RunStatus(value)
