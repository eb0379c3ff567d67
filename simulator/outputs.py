"""Writing what the tool produces (traces, rows, baselines, plots, CSVs) so that no result is
lost: a path is checked before any work starts, and a file is written whole or not at all (a
temporary file in the same folder, then an atomic rename over the target).
"""
from __future__ import annotations

import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence


class OutputError(ValueError):
    """An output path that cannot be written: the message names the option, the path and why."""


def check_output(path: str | Path, what: str, suffixes: Sequence[str] | None = None) -> Path:
    """The path, if a file can be written there: its suffix is one of `suffixes`, it is not a
    folder, and its folder exists or can be created (no file stands in the way, not at the root
    of the filesystem, writable). Writability is tried, not asked: os.access says yes to root
    for folders it cannot write (a read-only mount, an immutable folder)."""
    if "\0" in str(path):
        raise OutputError(f"{what}: {str(path)!r}: a path cannot hold a NUL byte")
    try:
        return _check_output(Path(path), what, suffixes)
    except OSError as e:               # the name too long, a symlink loop, no access on the way
        raise OutputError(f"{what}: cannot write '{path}': {e.strerror or e}") from None


def _check_output(path: Path, what: str, suffixes: Sequence[str] | None) -> Path:
    if suffixes and path.suffix.lower() not in suffixes:
        raise OutputError(f"{what}: '{path}' must end in {', '.join(suffixes)}")
    if str(path) in ("", ".") or path.is_dir():
        raise OutputError(f"{what}: '{path}' is a folder; give a file name")
    folder = path.parent
    probe = folder
    while not probe.exists():
        if probe.is_symlink():
            raise OutputError(f"{what}: cannot write '{path}': '{probe}' is a symbolic link that leads nowhere "
                              f"(a loop, or a missing target)")
        probe = probe.parent
    if not probe.is_dir():
        raise OutputError(f"{what}: cannot write '{path}': '{probe}' is a file, not a folder")
    if probe != folder and probe.resolve() == Path(probe.resolve().anchor):
        raise OutputError(f"{what}: cannot write '{path}': its folder '{folder}' would be made at the root of "
                          f"the filesystem; make it first if that is meant")
    if path.exists():
        if not path.is_file():
            raise OutputError(f"{what}: cannot write '{path}': not a regular file")
        try:
            with path.open("ab"):          # opens for writing, changes nothing
                pass
        except OSError as e:
            raise OutputError(f"{what}: cannot write '{path}': {e.strerror or e}") from None
    why = _cannot_write_in(probe)
    if why:
        raise OutputError(f"{what}: cannot write '{path}': '{probe}' is not writable ({why})")
    return path


def _cannot_write_in(folder: Path) -> str | None:
    """Why no file can be made in `folder` (None if one can): a real attempt, removed at once."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ascend-sim-probe-", dir=folder)
    except OSError as e:
        return e.strerror or str(e)
    os.close(fd)
    os.unlink(tmp)
    return None


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
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except OSError as e:
        raise OutputError(f"{what}: cannot write '{path}': {e.strerror or e}") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def _mode_for(path: Path) -> int:
    """The mode the written file gets: the replaced file's own, or what open() would give a new
    file under the process's umask (mkstemp makes its files 0600, which would lock out the next
    reader of a shared workspace)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text(path: str | Path, text: str, what: str = "output") -> Path:
    """Write a text file atomically."""
    with atomic_path(path, what) as tmp:
        tmp.write_text(text)
    return Path(path)
