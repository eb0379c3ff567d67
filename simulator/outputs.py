"""Writing what the tool produces (traces, rows, baselines, plots, CSVs) so that no result is
lost: a path is checked before any work starts, and a file is written whole or not at all (a
temporary file in the same folder, then an atomic rename over the target).
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence


class OutputError(ValueError):
    """An output path that cannot be written: the message names the option, the path and why."""


def check_output(path: str | Path, what: str, suffixes: Sequence[str] | None = None) -> Path:
    """The path, if a file can be written there: its suffix is one of `suffixes`, it is not a
    folder, and its folder exists or can be created (no file stands in the way, writable)."""
    path = Path(path)
    if suffixes and path.suffix.lower() not in suffixes:
        raise OutputError(f"{what}: '{path}' must end in {', '.join(suffixes)}")
    if str(path) in ("", ".") or path.is_dir():
        raise OutputError(f"{what}: '{path}' is a folder; give a file name")
    folder = path.parent
    probe = folder
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise OutputError(f"{what}: cannot write '{path}': '{probe}' is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise OutputError(f"{what}: cannot write '{path}': '{probe}' is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"{what}: cannot write '{path}': the file is read-only")
    return path


@contextmanager
def atomic_path(path: str | Path, what: str = "output") -> Iterator[Path]:
    """A temporary path beside `path` (same suffix, so writers that go by it still work) that
    replaces `path` when the block ends without an exception; otherwise it is removed."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix or ".tmp", dir=path.parent)
        os.close(fd)
    except OSError as e:
        raise OutputError(f"{what}: cannot write '{path}': {e.strerror or e}") from None
    tmp = Path(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as e:
        raise OutputError(f"{what}: cannot write '{path}': {e.strerror or e}") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | Path, text: str, what: str = "output") -> Path:
    """Write a text file atomically."""
    with atomic_path(path, what) as tmp:
        tmp.write_text(text)
    return Path(path)
