"""Generated blocks in Markdown documents: the text between

    <!-- generated: NAME (COMMAND) -->
    ...
    <!-- end generated: NAME -->

is written by a program, never by hand. `blocks` finds them, `replace` swaps one block's body
for new text (the markers stay), `drift` names the blocks whose body differs from what the
program makes now. A marker without its end, or a block named twice, is an error naming the
file and line."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_START = re.compile(r"^<!-- generated: (?P<name>[\w.-]+) \((?P<cmd>[^)]*)\) -->$")
_END = "<!-- end generated: {name} -->"


class BlockError(ValueError):
    """A malformed generated block: the message starts with file:line."""


@dataclass(frozen=True)
class Block:
    name: str
    command: str
    start: int          # index of the start marker's line
    end: int            # index of the end marker's line
    body: str


def start_marker(name: str, command: str) -> str:
    return f"<!-- generated: {name} ({command}) -->"


def blocks(text: str, path: Path | str = "<text>") -> dict[str, Block]:
    """The generated blocks of a document, by name."""
    lines = text.split("\n")
    out: dict[str, Block] = {}
    for i, line in enumerate(lines):
        m = _START.match(line)
        if not m:
            continue
        name = m.group("name")
        if name in out:
            raise BlockError(f"{path}:{i + 1}: generated block {name!r} also at line "
                             f"{out[name].start + 1}")
        try:
            end = lines.index(_END.format(name=name), i + 1)
        except ValueError:
            raise BlockError(f"{path}:{i + 1}: generated block {name!r} has no end marker "
                             f"({_END.format(name=name)})") from None
        out[name] = Block(name, m.group("cmd"), i, end, "\n".join(lines[i + 1:end]))
    return out


def replace(text: str, name: str, body: str, path: Path | str = "<text>") -> str:
    """`text` with block `name`'s body replaced by `body` (no trailing newline needed)."""
    found = blocks(text, path)
    if name not in found:
        raise BlockError(f"{path}:0: no generated block {name!r} (add its markers: "
                         f"{start_marker(name, 'command')} ... {_END.format(name=name)})")
    b = found[name]
    lines = text.split("\n")
    return "\n".join(lines[:b.start + 1] + body.rstrip("\n").split("\n") + lines[b.end:])


def drift(text: str, bodies: dict[str, str], path: Path | str = "<text>") -> list[str]:
    """The names of the blocks whose body is not what `bodies` says it should be."""
    found = blocks(text, path)
    missing = sorted(set(bodies) - set(found))
    if missing:
        raise BlockError(f"{path}:0: no generated block {', '.join(map(repr, missing))}")
    return [n for n, body in bodies.items() if found[n].body != body.rstrip("\n")]
