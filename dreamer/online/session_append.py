"""Appending the messages of a live session: stored and metered in one transaction, with a
background flush scheduled when one is due."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlmodel import Session as DBSession
from sqlmodel import select

from dreamer.core.errors import IngestError, NotFound
from dreamer.core.models import Session
from dreamer.core.scope import Scope
from dreamer.engine.runtime import Runtime
from dreamer.ingest.store import append_messages
from dreamer.online.flush.trigger import Meter, flush_trigger, meter_in, with_marks
from dreamer.store.db import session_scope

if TYPE_CHECKING:
    from dreamer.online.flush.runner import FlushRunner


def owned_session(s: DBSession, scope: Scope, external_id: str, *, source: str = "api") -> Session | None:
    """The scope's session with this id, None when the user has none; NotFound when the user's
    session is out of the scope (another agent's or team's). Another user's session of the same
    id is not looked at: each user has their own ids, and whether someone else uses one is not
    theirs to learn."""
    row = s.exec(
        select(Session)
        .where(Session.user_id == scope.user_id)
        .where(Session.source == source)
        .where(Session.external_id == external_id)
    ).first()
    if row is not None and not scope.matches(row):
        raise NotFound(f"no session {external_id}")
    return row


def own_session_id(rt: Runtime, scope: Scope, external_id: str) -> int:
    """The store's id of the scope's live session `external_id`; NotFound when it has none."""
    with session_scope(rt.engine) as s:
        sess = owned_session(s, scope, external_id)
    if sess is None or sess.id is None:
        raise NotFound(f"no session {external_id}")
    return sess.id


def append(
    rt: Runtime,
    scope: Scope,
    external_id: str,
    messages: Sequence[dict[str, Any]],
    *,
    context_tokens: int | None = None,
    compacted: bool = False,
    runner: FlushRunner | None = None,
) -> Meter:
    """Record new messages of a live session and read its meter, in one transaction, and schedule
    a flush when one is due."""
    if compacted and not messages:
        raise IngestError("compacted must come with the first messages after the compaction")
    marked = with_marks(messages, context_tokens=context_tokens, compacted=compacted)
    with session_scope(rt.engine) as s:
        owned_session(s, scope, external_id)
        rec = append_messages(
            rt.engine,
            external_id,
            marked,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            project=scope.project,
            team=scope.team,
            max_message_bytes=rt.settings.max_message_bytes,
            db_session=s,
            raw=rt.settings.store_raw_messages,
        )
        meter = meter_in(s, rt.settings, rec.session_id, figure=context_tokens if not messages else None)
    meter.trigger = flush_trigger(meter.tokens, meter.messages_since_flush, meter.cycle_flushed, rt.settings)
    if meter.trigger and runner is not None:
        meter.flush_scheduled = runner.schedule(rec.session_id, meter.trigger)
    return meter
