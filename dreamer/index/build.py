"""Which index a deployment uses: Qdrant Edge in a folder by default, a Qdrant server when a URL
is set, or a `QdrantClient` handed in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreamer.index.contract import MemoryIndex
from dreamer.index.edge import EdgeIndex
from dreamer.index.qdrant import index_errors

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

    from dreamer.core.settings import Settings


def build_index(settings: Settings, dim: int, *, client: QdrantClient | None = None) -> MemoryIndex:
    """Qdrant Edge in settings.index_dir when no qdrant_url is set, else a Qdrant server.

    A `client` handed in (e.g. local mode `QdrantClient(path=...)`) is used as is.
    """
    if client is None and not settings.qdrant_url:
        return EdgeIndex(settings.index_dir, dim, flush_seconds=settings.index_flush_seconds)
    from dreamer.index.server import QdrantClientIndex  # qdrant-client loads only when used

    if client is None:
        from qdrant_client import QdrantClient

        with index_errors("connect"):
            client = QdrantClient(url=settings.qdrant_url, api_key=settings.qdrant_api_key or None)
    return QdrantClientIndex(client, collection=settings.qdrant_collection, dim=dim)
