"""How errors become HTTP answers: the status of each dreamer error, and 422 details that are
short and always JSON."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from dreamer.core.code_work.experience import InvalidExperience
from dreamer.core.errors import (
    AlreadyExists,
    DreamerError,
    Forbidden,
    IndexInUse,
    IngestError,
    LLMError,
    NotAllowedNow,
    NotFound,
    Retryable,
    ScopeRequired,
    TooLarge,
)
from dreamer.ingest.base import clean_text
from dreamer.online.agent_writes import UntrustedWrite, WriteRejected

log = logging.getLogger(__name__)

MAX_ERRORS_SHOWN = 20  # a 422 lists at most this many problems
MAX_ECHO_CHARS = 200  # and echoes at most this much of an input

_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (NotFound, 404),
    (NotAllowedNow, 409),
    (InvalidExperience, 422),
    (Forbidden, 403),
    (AlreadyExists, 409),
    (TooLarge, 413),
    (IngestError, 422),
    (UntrustedWrite, 422),
    (WriteRejected, 409),
    (ScopeRequired, 400),
    (IndexInUse, 503),
    (LLMError, 502),
    (Retryable, 503),
    (DreamerError, 500),
)


def add_error_handlers(app: FastAPI) -> None:
    """Answer dreamer errors with their status, and invalid requests with `validation_detail`."""

    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        code = next(c for kind, c in _STATUS if isinstance(exc, kind))
        if code >= 500:
            log.error("request failed: %s: %s", type(exc).__name__, exc)
        return JSONResponse({"detail": clean_text(str(exc))}, status_code=code)

    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": validation_detail(exc.errors())}, status_code=422)

    for kind, _ in _STATUS:
        app.add_exception_handler(kind, handle)
    app.add_exception_handler(RequestValidationError, invalid)  # type: ignore[arg-type]  # starlette types every handler as taking Exception


def validation_detail(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """The first `MAX_ERRORS_SHOWN` problems (then how many more), each echoing its input cut short
    and made JSON: NaN, infinities and undecodable bytes as text."""
    shown = [{**e, "input": _echo(e["input"])} if "input" in e else e for e in errors[:MAX_ERRORS_SHOWN]]
    encoded: list[dict[str, Any]] = jsonable_encoder(shown)  # every input is short by now, however deep it came
    if len(errors) > MAX_ERRORS_SHOWN:
        encoded.append(
            {"type": "too_many_errors", "loc": [], "msg": f"{len(errors) - MAX_ERRORS_SHOWN} more not shown"}
        )
    return [_encodable(e) for e in encoded]


def _echo(value: Any) -> Any:
    try:
        value = _json_safe(value)
    except RecursionError:
        return "nested too deeply, not shown"
    if isinstance(value, str) and len(value) > MAX_ECHO_CHARS:
        return value[:MAX_ECHO_CHARS] + "..."
    if isinstance(value, (list, dict)) and len(json.dumps(value, default=str)) > MAX_ECHO_CHARS:
        return f"{'an array' if isinstance(value, list) else 'an object'} of {len(value)} items, not shown"
    return value


def _json_safe(value: Any) -> Any:
    """`value` with bytes decoded (undecodable bytes replaced) and NaN or infinities as text."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _json_safe(v) for k, v in value.items()}
    return value


def _encodable(value: Any) -> Any:
    """JSON data with every string (keys too) as UTF-8 can encode it: an echoed input may not be."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_encodable(v) for v in value]
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    return value
