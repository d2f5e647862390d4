"""The data folder is its owner's: folders dreamer creates are 0700 and its files 0600, whatever
the umask; and nothing is written under it while the disk has less than `min_free_mb` free, nor
ever with less than `HARD_FLOOR_MB` free, whatever the setting says: a store or an embedded
index written or mapped on a full disk dies (a bus error) instead of failing cleanly."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dreamer.core.errors import NoSpace

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
MB = 1024 * 1024
HARD_FLOOR_MB = 16  # free space below which nothing is written or mapped, whatever `min_free_mb` says


def private_dir(path: Path) -> Path:
    """`path` as a folder, each folder created for it 0700 (a folder already there keeps its mode)."""
    path = Path(path)
    missing: list[Path] = []
    here = path
    while not here.exists() and here != here.parent:
        missing.append(here)
        here = here.parent
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    for made in missing:  # `mode` applies to the last folder only, and the umask may strip it further
        os.chmod(made, PRIVATE_DIR)
    return path


def private_file(path: Path) -> Path:
    """`path` created empty 0600 if it is missing (so what opens it next finds it private); a file
    already there keeps its mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return path
    try:
        os.fchmod(fd, PRIVATE_FILE)  # the umask may have stripped the owner's bits
    finally:
        os.close(fd)
    return path


def space_problem(folder: Path, free_bytes: int, min_free_mb: int) -> str | None:
    """Why writing under `folder` with `free_bytes` free would break the rule of `min_free_mb`
    (never less than `HARD_FLOOR_MB`), or None."""
    if free_bytes >= max(min_free_mb, HARD_FLOOR_MB) * MB:
        return None
    if min_free_mb >= HARD_FLOOR_MB:
        return (
            f"only {free_bytes / MB:.1f} MB free under {folder} (DREAMER_MIN_FREE_MB is {min_free_mb}):"
            " nothing was written; free some space or lower the setting"
        )
    return (
        f"only {free_bytes / MB:.1f} MB free under {folder}, below the hard floor of {HARD_FLOOR_MB} MB"
        " (DREAMER_MIN_FREE_MB cannot lower it): nothing was written; free some space"
    )


def check_free_space(folder: Path, min_free_mb: int = 0) -> None:
    """`NoSpace` when the disk holding `folder` (or the nearest folder above it that exists) has
    less than `min_free_mb` MB free, or less than `HARD_FLOOR_MB` (whatever `min_free_mb` says)."""
    here = Path(folder).absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    problem = space_problem(Path(folder), shutil.disk_usage(here).free, min_free_mb)
    if problem is not None:
        raise NoSpace(problem)
