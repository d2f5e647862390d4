"""The Qdrant Edge shard on disk: the folder lock one process holds, the shard's layout
(vectors, payload indexes), and opening, creating or loading it with its errors translated."""

from __future__ import annotations

import fcntl
import json
import logging
import os
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from dreamer.core.errors import ConfigError, DreamerError, IndexFailure
from dreamer.index.contract import DENSE, KEYWORD_FIELDS, SAID, SPARSE, TIME_FIELD, folder_in_use
from dreamer.index.qdrant import index_errors

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
EDGE_CONFIG_FILE = "edge_config.json"


def lock_folder(path: Path) -> int:
    """Take an exclusive advisory lock on <path>/.lock for the life of the index."""
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        raise folder_in_use(path, holder) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return fd


def unlock_folder(fd: int) -> None:
    """Release the lock `lock_folder` took."""
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def edge_config(dim: int, said: bool = True) -> qe.EdgeConfig:
    """Vectors, graphs and payloads held in memory. Payloads default to memory-mapped files,
    whose pages the kernel may drop when idle: every search reads the payloads of its hits,
    and re-reading them from disk then costs more than the search itself. Segments built
    before this setting keep their payloads on disk until the optimizer rewrites them.
    `said`: the multivector of evidence messages (a shard built before it has none)."""
    vectors = {DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)}
    if said:
        vectors[SAID] = qe.EdgeVectorParams(
            size=dim,
            distance=qe.Distance.Cosine,  # only scored, never searched: no graph
            multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
            hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
        )
    return qe.EdgeConfig(
        vectors=vectors,
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        hnsw_config=qe.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=10_000),
        payload_memory=qe.Memory.Cached,
    )


def _stored_vectors(path: Path) -> dict[str, Any]:
    """The named vectors recorded in an existing shard's config ({} if unreadable)."""
    try:
        data = json.loads((path / EDGE_CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("cannot read %s: %s", path / EDGE_CONFIG_FILE, exc)
        return {}
    vectors = data.get("vectors") if isinstance(data, dict) else None
    return vectors if isinstance(vectors, dict) else {}


def _dim_mismatch(path: Path, stored: int, dim: int) -> ConfigError:
    return ConfigError(
        f"index at {path} holds {stored}-dimensional vectors but the embedder gives {dim}; "
        "use the embedder the index was built with, or delete the index folder and reindex"
    )


def _open_error(exc: Exception, path: Path, dim: int) -> DreamerError:
    """Translate an Edge open failure: folder locked, incompatible config, anything else."""
    message = str(exc)
    if "WouldBlock" in message:
        return folder_in_use(path)
    if "ncompatible" in message:
        return ConfigError(
            f"index at {path} does not match the expected layout ({dim}-dimensional "
            f"{DENSE!r} + {SPARSE!r}): {message}; delete the index folder and reindex"
        )
    return IndexFailure(f"cannot open index at {path}: {message}")


def open_shard(path: Path, dim: int) -> tuple[qe.EdgeShard, bool]:
    """The shard in `path` (loaded if it exists, else created) with its payload indexes, and
    whether it keeps message vectors."""
    if (path / EDGE_CONFIG_FILE).exists():
        shard, said = _load(path, dim)
    else:
        shard, said = _create(path, dim), True
    _ensure_field_indexes(shard)
    return shard, said


def _load(path: Path, dim: int) -> tuple[qe.EdgeShard, bool]:
    stored = _stored_vectors(path)
    size = (stored.get(DENSE) or {}).get("size")
    if isinstance(size, int) and size != dim:
        raise _dim_mismatch(path, size, dim)
    said = SAID in stored
    if not said:
        log.warning("index at %s was built without message vectors: `dreamer reindex` rebuilds it with them", path)
    try:
        shard = qe.EdgeShard.load(str(path), edge_config(dim, said))
    except Exception as exc:  # Edge raises plain Exception
        raise _open_error(exc, path, dim) from exc
    log.info("opened index at %s (%d dimensions)", path, dim)
    return shard, said


def new_shard(path: Path, dim: int, said: bool) -> qe.EdgeShard:
    """An empty shard created in `path` with the layout (`said` or not) and payload indexes that
    `open_shard` gives: what an index is rewritten into."""
    shard = _create(path, dim, said)
    _ensure_field_indexes(shard)
    return shard


def _create(path: Path, dim: int, said: bool = True) -> qe.EdgeShard:
    try:
        shard = qe.EdgeShard.create(str(path), edge_config(dim, said))
    except Exception as exc:  # Edge raises plain Exception
        raise _open_error(exc, path, dim) from exc
    log.info("created index at %s (%d dimensions)", path, dim)
    return shard


def _ensure_field_indexes(shard: qe.EdgeShard) -> None:
    """Keyword indexes for the scope/filter fields, a float index on created_at.

    Only user_id (the tenant) gets payload-aware HNSW links; the other fields have few
    distinct values, and extra graphs for them would slow optimize() for little gain.
    """
    existing = set(shard.info().payload_schema)
    wanted: dict[str, qe.KeywordIndexParams | qe.FloatIndexParams] = {
        key: qe.KeywordIndexParams(enable_hnsw=False) for key in KEYWORD_FIELDS
    }
    wanted["user_id"] = qe.KeywordIndexParams(is_tenant=True)
    wanted[TIME_FIELD] = qe.FloatIndexParams(enable_hnsw=False)
    missing = {key: schema for key, schema in wanted.items() if key not in existing}
    if not missing:
        return
    with index_errors("payload index creation"):
        for key, schema in missing.items():
            shard.update(qe.UpdateOperation.create_field_index(key, schema))
        shard.flush()
