"""Imported once by the crash driver's fork server, so each forked child starts warm."""

from __future__ import annotations

import gc

import alembic.runtime.migration  # noqa: F401
import openai  # noqa: F401
import qdrant_edge  # noqa: F401
import sqlalchemy.dialects.sqlite  # noqa: F401

import dreamer.cli
import dreamer.embed.embedders
import dreamer.engine.dream
import dreamer.index.edge
import dreamer.llm.client  # noqa: F401
from dreamer.core.tokens import count_tokens

from . import crashkit  # noqa: F401

count_tokens("warm up the encoder")
from dreamer.index.bm25 import _bm25

_bm25()
gc.freeze()  # forked children then never touch (and copy) the preloaded objects in a collection
