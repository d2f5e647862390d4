"""The small context object a process builds once: settings, store, and lazily the index,
embedder, LLM, busy signal and user locks. Constructors accept ready-made parts, so tests hand in real
local ones instead of patching."""

from __future__ import annotations

import enum
import gc
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, TypedDict, Unpack

from sqlalchemy.engine import Engine

from dreamer.core.settings import Settings
from dreamer.store import db

if TYPE_CHECKING:
    from dreamer.embed.embedders import Embedder
    from dreamer.index.contract import MemoryIndex
    from dreamer.llm.client import LLM
    from dreamer.providers.guard import ProviderGuard
    from dreamer.store.busy import BusySignal
    from dreamer.store.user_locks import UserLocks

log = logging.getLogger(__name__)


class _Unset(enum.Enum):
    """A part not handed in: the runtime builds it from the settings on first use."""

    UNSET = enum.auto()


UNSET = _Unset.UNSET
Unset = Literal[_Unset.UNSET]


class Closable(Protocol):
    def close(self) -> None: ...


class Parts(TypedDict, total=False):
    """What a caller may hand a runtime ready-made; a part left out is built from the settings."""

    engine: Engine | None
    llm: LLM | None | Unset
    embedder: Embedder | None | Unset
    index: MemoryIndex | Unset
    busy: BusySignal | Unset
    user_locks: UserLocks | Unset
    provider: ProviderGuard | None | Unset
    check_schema: bool


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    _llm: LLM | None | Unset = UNSET
    _embedder: Embedder | None | Unset = UNSET
    _index: MemoryIndex | Unset = UNSET
    _busy: BusySignal | Unset = UNSET
    _user_locks: UserLocks | Unset = UNSET
    _provider: ProviderGuard | None | Unset = UNSET
    _owned: list[Closable] = field(default_factory=list)

    @classmethod
    def open(cls, settings: Settings, **parts: Unpack[Parts]) -> Runtime:
        eng = parts.get("engine") or db.make_engine(settings.resolved_database_url())
        if parts.get("check_schema", True):
            db.require_schema(eng)
        return cls(
            settings,
            eng,
            parts.get("llm", UNSET),
            parts.get("embedder", UNSET),
            parts.get("index", UNSET),
            parts.get("busy", UNSET),
            parts.get("user_locks", UNSET),
            parts.get("provider", UNSET),
        )

    @property
    def llm(self) -> LLM | None:
        if self._llm is UNSET:
            from dreamer.engine.endpoint import open_llm

            self._llm = open_llm(self.settings, self.engine)
        return self._llm

    @property
    def embedder(self) -> Embedder | None:
        if self._embedder is UNSET:
            from dreamer.embed.embedders import build_embedder

            self._embedder = build_embedder(self.settings)
        return self._embedder

    @property
    def index(self) -> MemoryIndex:
        if self._index is UNSET:
            from dreamer.core.private import check_free_space
            from dreamer.engine.documents import DocumentedIndex
            from dreamer.index.build import build_index

            check_free_space(self.settings.data_dir)  # the hard floor: an index mapped on a full disk dies

            embedder = self.embedder
            dim = embedder.dim if embedder is not None else self.settings.embed_dim
            built = DocumentedIndex.from_settings(build_index(self.settings, dim), self.engine, self.settings, embedder)
            self.adopt_index(built)
            return built
        return self._index

    @property
    def opened_index(self) -> MemoryIndex | None:
        """The index if it was handed in or built already; None rather than building one."""
        return None if self._index is UNSET else self._index

    def adopt_index(self, index: MemoryIndex) -> None:
        """Use `index` from now on, and close it with the runtime."""
        self._index = index
        self.own(index)

    def own(self, part: Closable) -> None:
        """Close `part` with the runtime."""
        self._owned.append(part)

    def index_ready(self) -> None:
        """Open the index now (an embedded one is taken, a server is reached): a command that
        writes SQL and then the index fails here, before it has written anything."""
        self.index.count()

    @property
    def busy(self) -> BusySignal:
        if self._busy is UNSET:
            from dreamer.store.busy import build_busy_signal

            self._busy = build_busy_signal(self.settings, self.engine)
        return self._busy

    @property
    def user_locks(self) -> UserLocks:
        """What a writer holds while it consolidates a user (`dreamer.user_locks`)."""
        if self._user_locks is UNSET:
            from dreamer.store.user_locks import build_user_locks

            self._user_locks = build_user_locks(self.settings, self.engine, self.index)
        return self._user_locks

    @property
    def provider(self) -> ProviderGuard | None:
        """The external memory provider behind its guard, in the `external` and `both` modes; else None."""
        if self._provider is UNSET:
            from functools import partial

            from dreamer.providers.guard import open_guard
            from dreamer.store.provider_breakers import record

            external = self.settings.memory_mode in ("external", "both")
            self._provider = open_guard(self.settings, partial(record, self.engine)) if external else None
            if self._provider is not None:
                self.own(self._provider)
        return self._provider

    def close(self) -> None:
        for part in self._owned:
            part.close()
        self._owned.clear()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def settle(rt: Runtime, *, load_model: bool = True) -> int:
    """Start-up of a long-lived process (daemon, worker, server): load the local embedding model
    now (unless the process never embeds), then freeze every object allocated so far out of the
    garbage collector's view (`gc.freeze`). Libraries and the model are about 550 000 objects
    that live as long as the process, and every full collection walked them all: 0.24 s each,
    2.8 ms per batch of 16 candidates in `dreamer bench consolidate` (as measured there). Returns how many
    objects were frozen."""
    from dreamer.embed.embedders import preload

    if load_model:
        preload(rt.embedder)
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("start-up heap settled: %d objects out of the collector's view", frozen)
    return frozen
