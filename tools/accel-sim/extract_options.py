"""Every option gpgpu-sim (and Accel-Sim's trace front end) registers, read from their C++
source: the name, the option_parser type and the default string of each
``option_parser_register(opp, name, type, &variable, description, default)`` call. Names built
in a loop (``ss << "-specialized_unit_" << j + 1``, j < SPECIALIZED_UNIT_NUM) are expanded.

Used by check_config.py to generate the registration table of driver.cc, so that the real
option parser (src/option_parser.cc, compiled from the fetched source) meets every option of a
real configuration file with the type and default gpgpu-sim gives it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

TYPES = {"OPT_INT32", "OPT_UINT32", "OPT_INT64", "OPT_UINT64", "OPT_BOOL", "OPT_FLOAT",
         "OPT_DOUBLE", "OPT_CHAR", "OPT_CSTR"}
CALL = "option_parser_register("
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Option:
    name: str
    type: str
    default: str | None  # None: NULL (a C-string option with no default)
    where: str           # file of the registration


def _call_end(text: str, start: int) -> int:
    """Index of the ')' closing the call whose '(' is at ``start``, skipping string and char
    literals and comments."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < len(text) and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j
        elif text.startswith("//", i):
            i = text.index("\n", i)
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unterminated call at {start}")


def _split_args(body: str) -> list[str]:
    """Top-level comma-separated arguments of a call body."""
    args, depth, cur, i = [], 0, [], 0
    while i < len(body):
        c = body[i]
        if c in "\"'":
            j = i + 1
            while j < len(body) and body[j] != c:
                j += 2 if body[j] == "\\" else 1
            cur.append(body[i:j + 1])
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    args.append("".join(cur).strip())
    return args


def _first_branch(arg: str) -> str:
    """An argument written under #if / #else / #endif: the #if branch (gpgpu-sim's conditions
    here are CUDA-version tests that a current toolkit passes)."""
    if "#if" not in arg:
        return arg
    keep, state = [], "before"
    for line in arg.splitlines():
        s = line.strip()
        if s.startswith("#if"):
            state = "if"
        elif s.startswith(("#else", "#elif")):
            state = "skip"
        elif s.startswith("#endif"):
            state = "after"
        elif state in ("before", "if", "after"):
            keep.append(line)
    return "\n".join(keep)


def _literal(arg: str) -> str | None:
    """The value of an argument made of adjacent string literals (C concatenation)."""
    arg = _first_branch(arg)
    parts = _LITERAL.findall(arg)
    rest = _LITERAL.sub("", arg).strip()
    if not parts or rest:
        return None
    return "".join(bytes(p, "utf-8").decode("unicode_escape") for p in parts)


def _loop_names(text: str, at: int, loop_bound: int) -> list[str]:
    """Names a loop registers: the last ``ss << "<prefix>" << j + 1`` before ``at``."""
    m = None
    for m in re.finditer(r'ss\s*<<\s*"([^"]+)"\s*<<\s*j\s*\+\s*1', text[:at]):
        pass
    if m is None:
        raise ValueError("a registration with a computed name and no 'ss << prefix << j + 1'")
    return [f"{m.group(1)}{j + 1}" for j in range(loop_bound)]


def extract(text: str, where: str, loop_bound: int = 8) -> list[Option]:
    """The registrations of one source file (``loop_bound``: SPECIALIZED_UNIT_NUM)."""
    out, pos = [], 0
    while True:
        at = text.find(CALL, pos)
        if at < 0:
            return out
        end = _call_end(text, at + len(CALL) - 1)
        pos = end
        line_start = text.rfind("\n", 0, at) + 1
        if text[line_start:at].strip().startswith(("//", "void", "*")) or \
                "option_parser_t opp, const char *name" in text[at:end]:
            continue                                   # a declaration or comment
        args = _split_args(text[at + len(CALL):end])
        if len(args) != 6 or args[2] not in TYPES:
            continue
        default = _literal(args[5])
        if default is None and args[5].strip() not in ("NULL", "nullptr"):
            raise ValueError(f"{where}: default of {args[1]} is not a literal: {args[5]}")
        name = _literal(args[1])
        names = [name] if name is not None else _loop_names(text, at, loop_bound)
        out.extend(Option(n, args[2], default, where) for n in names)


def specialized_unit_num(header: str) -> int:
    m = re.search(r"#define\s+SPECIALIZED_UNIT_NUM\s+(\d+)", header)
    if not m:
        raise ValueError("SPECIALIZED_UNIT_NUM not found")
    return int(m.group(1))


def c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def registration_table(options: list[Option]) -> str:
    """The C++ initialiser rows driver.cc includes: {name, type, default}."""
    seen, rows = set(), []
    for o in options:
        if o.name in seen:
            continue
        seen.add(o.name)
        default = "NULL" if o.default is None else c_string(o.default)
        rows.append(f"  {{{c_string(o.name)}, {o.type}, {default}}},")
    return "\n".join(rows) + "\n"
