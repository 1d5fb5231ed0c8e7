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


def render_entry(key: str, entry: dict, indent: int) -> list[str]:
    text = yaml.safe_dump({key: entry}, sort_keys=False, width=100, allow_unicode=True,
                          default_flow_style=False)
    return [" " * indent + ln if ln else ln for ln in text.rstrip("\n").split("\n")]


def set_entries(text: str, path: list[str], entries: dict[str, dict]) -> str:
    """`text` with each key of `entries` replaced (in place) or added (at the end of the
    mapping at `path`, e.g. ["characteristics"] or ["devices", NAME, "characteristics"])."""
    lines = text.split("\n")
    trailing = lines[-1] == ""
    if trailing:
        lines.pop()
    for key, entry in entries.items():
        head, end, indent = _section(lines, path)
        child = indent + 2
        hit = _find_child(lines, head + 1, end, key)
        if hit is not None:
            i, child = hit
            lines[i:_block_end(lines, i, child)] = render_entry(key, entry, child)
        else:
            first = next((_key_of(lines[j]) for j in range(head + 1, end)
                          if _key_of(lines[j])), None)
            if first:
                child = first[0]
            lines[end:end] = render_entry(key, entry, child)
    return "\n".join(lines) + ("\n" if trailing else "")
