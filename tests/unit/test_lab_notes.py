"""Lab notes (which board, which night, what it read) live in docs/, not in the code: no
comment or docstring of the measuring layers (the core, the topics, the models, the plugin's
own modules) names an H100 or H200. A block that cites a datasheet or a whitepaper (a
documented peak, with its source) is a citation, not a lab note. The reporting layers (cli/,
results/) name boards as examples of device names and are not read here.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest_gpuchar

PKG = Path(pytest_gpuchar.__file__).parent
SKIPPED = ("cli", "results")
BOARD = re.compile(r"\bG?H[12]00\b")
CITATION = re.compile(r"whitepaper|datasheet", re.IGNORECASE)


def text_blocks(source: str) -> list[list[tuple[int, str]]]:
    """The comments (runs of comments on consecutive lines, one block) and the docstrings
    (every string statement) of `source`, as lists of (line number, text)."""
    out: list[list[tuple[int, str]]] = []
    last = -2
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        if tok.start[0] != last + 1 or not out:
            out.append([])
        out[-1].append((tok.start[0], tok.string))
        last = tok.start[0]
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            out.append([(node.lineno + i, line)
                        for i, line in enumerate(node.value.value.splitlines())])
    return out


def board_lines(source: str) -> list[tuple[int, str]]:
    """Lines of comments and docstrings that name a board, outside citations."""
    found = []
    for block in text_blocks(source):
        if CITATION.search("\n".join(text for _, text in block)):
            continue
        found += [(n, text.strip()) for n, text in block if BOARD.search(text)]
    return found


def test_a_board_in_a_comment_or_a_docstring_is_found():
    src = ('"""Module (H200: 14.8 s)."""\n'
           "X = 1  # plain comment\n"
           "# a note: on an H100 it read 12.9 s\n"
           "# continued\n"
           "def f():\n"
           '    """fine"""\n'
           '    return "H100 in a string is data"\n')
    assert [n for n, _ in board_lines(src)] == [3, 1]


def test_a_citation_block_may_name_the_board():
    src = ("# Documented peak of H100/H200: NVIDIA H100 Tensor Core GPU Architecture\n"
           "# whitepaper (2022), 989.4 TFLOP/s\n"
           "PEAK = 4096\n")
    assert board_lines(src) == []


def test_no_board_named_in_the_comments_of_the_measuring_layers():
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] in SKIPPED:
            continue
        found += [f"{rel}:{n}: {text}" for n, text in board_lines(path.read_text())]
    assert not found, ("lab notes belong in docs/ (docs/run-time.md and each topic's doc, "
                       "'Lab notes' section), not in code comments:\n" + "\n".join(found))
