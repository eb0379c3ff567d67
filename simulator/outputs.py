"""Writing what the tool produces (traces, rows, baselines, plots, CSVs) so that no result is
lost: a path is checked before any work starts, and a file is written whole or not at all (a
temporary file in the same folder, then an atomic rename over the target).
"""
from __future__ import annotations

import errno
import os
import secrets
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
    replaces `path` when the block ends without an exception; otherwise it is removed. The file
    gets the mode of the one it replaces, or what open() gives a new file under the umask."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _new_file_beside(path)
    except OSError as e:
        raise OutputError(f"{what}: cannot write '{path}': {e.strerror or e}") from None
    try:
        yield tmp
        _keep_mode(path, tmp)
        os.replace(tmp, path)
    except OSError as e:
        raise OutputError(f"{what}: cannot write '{path}': {e.strerror or e}") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def _new_file_beside(path: Path) -> Path:
    """An empty new file in `path`'s folder, made as open() makes one (mode 0666 less the umask,
    applied by the system: no process-wide umask is read or changed, so threads are safe; mkstemp
    would make it 0600 and lock out the next reader of a shared workspace)."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}{path.suffix or '.tmp'}"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path.parent))


def _keep_mode(path: Path, tmp: Path) -> None:
    """Give `tmp` the mode of the file it is about to replace, if there is one; best effort (a
    mount that refuses chmod still gets its file)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    try:
        os.chmod(tmp, mode)
    except OSError:
        pass


def write_text(path: str | Path, text: str, what: str = "output") -> Path:
    """Write a text file atomically."""
    with atomic_path(path, what) as tmp:
        tmp.write_text(text)
    return Path(path)
