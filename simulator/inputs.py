"""Reading what the tool is given: every file it takes (traces, sweep files, profiles, reports,
msprof CSVs, journals) goes through `read_text`, every structured one through `parse_json` /
`parse_yaml`, and every number a user writes (in a file or a flag) through `number`. Each ends
in a value the model can use or in one error line naming the file, the field and what is wrong:
a folder where a file belongs, bytes that are not UTF-8, nesting deeper than any of the formats
has, a value that is not finite, not integral or out of its range.
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np
import yaml


class InputError(ValueError):
    """A file or value the tool cannot take: the message is one line naming it and why."""


# The largest file read whole: a trace of ~300,000 calls; YAML of more would take minutes to parse.
MAX_INPUT_BYTES = 32 << 20
# The deepest nesting any input format has is 5 (a profile's cores.aiv.buffers.UB); anything far
# deeper is not one of them, and would exhaust the parsers' recursion.
MAX_DEPTH = 32


def read_text(path: str | Path, what: str = "", error: type[Exception] = InputError,
              max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The file's text (UTF-8, an optional byte-order mark dropped), or `error` naming it: no
    such file, a folder or a device, larger than `max_bytes`, unreadable, not UTF-8."""
    path = Path(path)
    label = f"{what} {path}" if what else str(path)
    if "\0" in str(path):
        raise error(f"{label!r}: a path cannot hold a NUL byte")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{label}: no such file") from None
    except OSError as e:
        raise error(f"{label}: cannot read it ({e.strerror or e})") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{label}: is a folder; give a file")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{label}: not a regular file")
    if st.st_size > max_bytes:
        raise error(f"{label}: {st.st_size / 2 ** 20:,.1f} MiB, more than the {max_bytes >> 20} MiB an input "
                    f"file may have")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise error(f"{label}: cannot read it ({e.strerror or e})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{label}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
                    f"is it a binary file? save text files as UTF-8") from None


def check_depth(obj: Any, where: str, error: type[Exception] = InputError, limit: int = MAX_DEPTH) -> Any:
    """`obj` if its lists and mappings nest at most `limit` deep (checked without recursion)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth > limit:
            raise error(f"{where}: nested more than {limit} levels deep (no input format nests so deep)")
        stack.extend((c, depth + 1) for c in children)
    return obj


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(text: str, where: str, error: type[Exception] = InputError) -> Any:
    """JSON as the standard has it (no NaN or Infinity), nested at most MAX_DEPTH deep."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except ValueError as e:            # NaN / Infinity
        raise error(f"{where}: not valid JSON: {e}") from None
    except RecursionError:
        raise error(f"{where}: nested more than {MAX_DEPTH} levels deep (no input format nests so deep)") from None
    return check_depth(value, where, error)


# The most values (scalars, lists, mappings) a YAML file may stand for once its aliases are
# expanded: a trace of ~300,000 calls has about 4 million. Aliases are counted as they are met
# (each anchored node's expanded size once), so a 500-byte file that stands for 10^9 values is
# refused after reading it, before anything walks it.
MAX_YAML_VALUES = 5_000_000


class _TooManyValues(yaml.composer.ComposerError):
    """Valid YAML that stands for more values than any input of ours has."""


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, reading 1e3 and 1e-9 as numbers as YAML 1.2 and JSON do (YAML 1.1
    wants a dot, 1.0e-9, and reads the rest as text, which a number field then refuses), and
    counting the values the document stands for, aliases expanded, against MAX_YAML_VALUES."""

    def __init__(self, stream):
        super().__init__(stream)
        self._sizes: dict[int, int] = {}      # id(node) -> values it stands for, aliases expanded
        self._values = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = self.anchors.get(event.anchor)
            if node is not None and id(node) not in self._sizes:
                raise yaml.composer.ComposerError(None, None, f"the alias *{event.anchor} refers to a value "
                                                  f"that contains it", event.start_mark)
            node = super().compose_node(parent, index)
            self._count(self._sizes[id(node)], event.start_mark)
            return node
        node = super().compose_node(parent, index)
        if isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._sizes[id(child)] for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size = 1 + sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        else:
            size = 1
        self._sizes[id(node)] = size
        self._count(1, node.start_mark)
        return node

    def _count(self, n: int, mark) -> None:
        self._values += n
        if self._values > MAX_YAML_VALUES:
            raise _TooManyValues(None, None, f"stands for more than {MAX_YAML_VALUES:,} values once "
                                              f"its aliases are expanded (an alias bomb?)", mark)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def yaml_value(text: str) -> Any:
    """One YAML value (a command-line value: 3200, 1e-9, true, [1, 2], text), read as files are."""
    return _load(text)


def _load(text: str) -> Any:
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def parse_yaml(text: str, where: str, error: type[Exception] = InputError) -> Any:
    """YAML (safe: plain data only), nested at most MAX_DEPTH deep."""
    try:
        value = _load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or (str(e).splitlines() or ["malformed"])[0]
        kind = "" if isinstance(e, _TooManyValues) else "not valid YAML: "
        raise error(f"{where}: {kind}{problem}{at}") from None
    except RecursionError:
        raise error(f"{where}: nested more than {MAX_DEPTH} levels deep (no input format nests so deep)") from None
    return check_depth(value, where, error)


def number(value: Any, where: str, *, lo: float | None = None, hi: float | None = None,
           integral: bool = False, above: bool = False, error: type[Exception] = InputError,
           text: bool = True) -> int | float:
    """A number a user gave (an int, a float, or text of one where `text`, as on a command line;
    never a bool or null): finite, in [lo, hi] (lo excluded when `above`), and a whole number
    when `integral` (then returned as an int). Anything else raises `error` naming `where` and
    the value."""
    if isinstance(value, bool) or value is None or (isinstance(value, str) and not text):
        raise error(f"{where}: {value!r} is not a number")
    if isinstance(value, np.generic) and not isinstance(value, np.bool_):
        value = value.item()
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text, 10) if integral and text.lstrip("+-").isdigit() else float(text)
        except ValueError:
            raise error(f"{where}: {text!r} is not a number") from None
    if not isinstance(value, (int, float)):
        raise error(f"{where}: {value!r} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise error(f"{where}: {value!r} is not a finite number")
    if integral and isinstance(value, float):
        if not value.is_integer():
            raise error(f"{where}: {value!r} is not a whole number")
        value = int(value)
    bad_lo = lo is not None and (value <= lo if above else value < lo)
    if bad_lo or (hi is not None and value > hi):
        low = "" if lo is None else f"{'>' if above else '>='} {lo:g}"
        high = "" if hi is None else f"<= {hi:g}"
        raise error(f"{where}: {value!r} is out of range (must be {' and '.join(x for x in (low, high) if x)})")
    return value


def schema_error(e, origin: str, expected: dict[str, str] | None = None, data: Any = None) -> str:
    """A pydantic ValidationError as one line: each field at fault (once, whichever member of a
    union failed), its value, and what is wrong, or what the field holds from `expected` (by the
    field's top-level name, its value taken from `data`)."""
    parts: dict[str, str] = {}
    for err in e.errors():
        # union members show up in the location as type tags ('str', 'list[int]'): not fields
        loc = [str(x) for x in err["loc"] if isinstance(x, int) or not _is_type_tag(str(x))]
        given = err.get("input")
        if err["type"] == "extra_forbidden":
            known = f" (known: {', '.join(expected)})" if expected else ""
            parts[".".join(loc)] = f"unknown field '{'.'.join(loc)}'{known}"
            continue
        if expected and loc and loc[0] in expected:
            loc = loc[:1]
            given = data.get(loc[0]) if isinstance(data, dict) else None
        key = ".".join(loc)
        if key in parts:
            continue
        shown = f" = {given!r}"[:60] if loc and not isinstance(given, (dict, list, tuple)) else ""
        what = expected[loc[0]] if expected and loc and loc[0] in expected else err["msg"]
        parts[key] = f"field '{key}'{shown}: {what}" if loc else what
    return f"{origin}: " + "; ".join(parts.values())


def _is_type_tag(part: str) -> bool:
    return part in ("str", "int", "float", "bool", "list", "dict", "tuple", "none") or "[" in part or \
        part.startswith(("constrained-", "function-"))
