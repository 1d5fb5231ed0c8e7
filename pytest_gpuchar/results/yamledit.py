"""Editing an expectation file in place: one characteristic's entry replaced or added, every
other line of the file (other entries, comments, order, blank lines) kept byte for byte. The
result is validated by the caller (expectations.parse) before it replaces the file."""
from __future__ import annotations

import re

import yaml

_KEY = re.compile(r"^(?P<indent> *)(?P<key>\"[^\"]*\"|'[^']*'|[^\s#:][^:#]*?):(?P<rest>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _meaningful(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith("#")


def _key_of(line: str) -> tuple[int, str, str] | None:
    m = _KEY.match(line)
    if not m or not _meaningful(line):
        return None
    key = m.group("key").strip()
    if key[:1] in "\"'":
        key = key[1:-1]
    return len(m.group("indent")), key, m.group("rest").strip()


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """The index after the block that opens at `start` (a key at `indent`): every following
    line indented deeper (or blank) belongs to it; trailing blank and comment lines at the
    key's indent or less belong to what follows."""
    end = start + 1
    last = start + 1
    while end < len(lines):
        ln = lines[end]
        if _meaningful(ln) and _indent(ln) <= indent:
            break
        if _meaningful(ln):
            last = end + 1
        end += 1
    return last


def _find_child(lines: list[str], lo: int, hi: int, key: str) -> tuple[int, int] | None:
    """(line, indent) of `key` among the direct children of the lines lo..hi."""
    child_indent = None
    for i in range(lo, hi):
        k = _key_of(lines[i])
        if k is None:
            continue
        if child_indent is None:
            child_indent = k[0]
        if k[0] == child_indent and k[1] == key:
            return i, k[0]
    return None


def _section(lines: list[str], path: list[str]) -> tuple[int, int, int]:
    """(header line, end of the section, indent of the header) of the mapping at `path`,
    created (appended) where missing; an inline empty mapping `{}` becomes a block."""
    lo, hi, indent = 0, len(lines), -2
    for depth, name in enumerate(path):
        hit = _find_child(lines, lo, hi, name)
        if hit is None:
            at = hi
            while at > lo and not lines[at - 1].strip():
                at -= 1
            key = yaml.safe_dump(name).strip().removesuffix("...").strip()
            lines.insert(at, f"{' ' * (indent + 2)}{key}:")
            hit = (at, indent + 2)
        i, indent = hit
        k = _key_of(lines[i])
        if k and k[2] in ("{}", "null", "~"):
            lines[i] = lines[i][:lines[i].rindex(k[2])].rstrip()
        lo, hi = i + 1, _block_end(lines, i, indent)
    return lo - 1, hi, indent


ONE_LINE = 160      # an entry that fits in this many characters is written on one line


def _scalar(v) -> str:
    return yaml.safe_dump(v, width=10**9, allow_unicode=True).strip().removesuffix("...") \
        .strip()


def render_entry(key: str, entry: dict, indent: int) -> list[str]:
    """An entry as YAML lines: on one line (a flow mapping) when it fits in ONE_LINE
    characters, else a block whose plain lists and mappings are written inline."""
    flat = yaml.safe_dump(entry, sort_keys=False, width=10**9, allow_unicode=True,
                          default_flow_style=True).strip()
    line = f"{' ' * indent}{_scalar(key)}: {flat}"
    if len(line) <= ONE_LINE and "\n" not in flat:
        return [line]
    text = yaml.safe_dump({key: entry}, sort_keys=False, width=10**9, allow_unicode=True,
                          default_flow_style=None)
    return [" " * indent + ln if ln else ln for ln in text.rstrip("\n").split("\n")]


def set_entries(text: str, path: list[str], entries: dict[str, dict]) -> str:
    """`text` with each key of `entries` replaced (in place) or added (at the end of the
    mapping at `path`, e.g. ["characteristics"] or ["devices", NAME, "characteristics"]).
    The section is read once: its children's blocks are found in one pass and replaced from
    the last to the first."""
    lines = text.split("\n")
    trailing = lines[-1] == ""
    if trailing:
        lines.pop()
    if not entries:
        return "\n".join(lines) + ("\n" if trailing else "")
    head, end, indent = _section(lines, path)
    children: dict[str, tuple[int, int, int]] = {}
    child_indent = None
    for i in range(head + 1, end):
        k = _key_of(lines[i])
        if k is None:
            continue
        if child_indent is None:
            child_indent = k[0]
        if k[0] == child_indent:
            children[k[1]] = (i, _block_end(lines, i, k[0]), k[0])
    child = child_indent if child_indent is not None else indent + 2
    new = [k for k in entries if k not in children]
    tail = [ln for k in new for ln in render_entry(k, entries[k], child)]
    lines[end:end] = tail
    for key, (i, j, ind) in sorted(((k, children[k]) for k in entries if k in children),
                                   key=lambda kv: -kv[1][0]):
        lines[i:j] = render_entry(key, entries[key], ind)
    return "\n".join(lines) + ("\n" if trailing else "")
