"""The settings of what a person sees and steers (the Markdown read back, review mode, the
inspector) and of memory for code work: a part of `Settings`, kept in its own module so each
stays readable."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

CENTURY_SECONDS = 100 * 366 * 86_400  # as `settings.CENTURY_SECONDS`
MAX_MINUTES = CENTURY_SECONDS // 60


class PersonSettings(BaseSettings):
    """How a person's edits are read back, whether dreaming waits for review, and the inspector's logins."""

    view_poll_seconds: float = Field(
        3.0, ge=0, le=CENTURY_SECONDS, description="serve and run look for Markdown edits this often; 0 = off"
    )
    review_mode: bool = Field(
        False, description="new memories from dreaming wait as pending until a person accepts them"
    )
    ui_admin_token: str = Field(
        "", description="token that logs in to the inspector (/ui) as admin, seeing every user; empty = none"
    )
    ui_session_minutes: int = Field(480, ge=1, le=MAX_MINUTES, description="how long an inspector login lasts")

    # --- memory for code work
    experience_propagation_depth: int = Field(8, ge=1, le=1000)  # how far a change sends its dependents to review
    experience_search_k: int = Field(5, ge=1, le=100)  # entries `experience search` answers at most
