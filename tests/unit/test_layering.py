"""The package's layering, read from its source (AST, every import including those inside
functions and under `if TYPE_CHECKING:`, which counts like any other): no import cycle between
modules, the core knows no topic, no topic knows another or the pytest layer.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import pytest_gpuchar

PKG = Path(pytest_gpuchar.__file__).parent
NAME = "pytest_gpuchar"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache
def imports() -> dict[str, frozenset[str]]:
    """module -> the package modules it imports (a `from x import y` of a submodule y counts
    as importing x.y)."""
    mods = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            for t in targets:
                while t and t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != mod and t.startswith(NAME) and not (
                        mods[t].name == "__init__.py" and mod.startswith(t + ".")):
                    graph[mod].add(t)
    return {m: frozenset(ts) for m, ts in graph.items()}   # cached: shared by every test


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_graph_sees_relative_imports():
    g = imports()
    assert "pytest_gpuchar.core.probe" in g["pytest_gpuchar.core.build"]
    assert "pytest_gpuchar.core.ptx.frame" in g["pytest_gpuchar.core.ptx.chains"]


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_in_the_package():
    assert cycles(imports()) == []


ALLOWED = {          # layer -> the layers it may import
    "core": {"core"},
    "results": {"core", "results"},
    "models": {"core", "results", "models"},
    "topics": {"core", "results", "topics", "models"},
}


@pytest.mark.parametrize("lay", sorted(ALLOWED))
def test_layers_import_only_what_they_stand_on(lay):
    bad = sorted(f"{m} -> {t}" for m, ts in imports().items() if layer(m) == lay
                 for t in ts if layer(t) not in ALLOWED[lay])
    assert bad == []


def test_nothing_hides_an_import_under_type_checking():
    bad = sorted(str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
                 if "TYPE_CHECKING" in p.read_text())
    assert bad == []


def test_no_topic_imports_another_topic():
    bad = []
    for m, ts in imports().items():
        parts = m.split(".")
        if layer(m) != "topics" or len(parts) < 4:
            continue
        for t in ts:
            tp = t.split(".")
            if layer(t) == "topics" and len(tp) >= 4 and tp[2] != parts[2]:
                bad.append(f"{m} -> {t}")
    assert bad == []


def test_no_class_name_is_defined_twice_in_the_core_and_the_topics():
    """A class name means one thing across the core and the topics (a reader of a traceback
    or a test never has to ask which Rate, Level or Layout)."""
    seen: dict[str, list[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        mod = _module_name(path)
        if layer(mod) not in ("core", "topics"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                seen.setdefault(node.name, []).append(mod)
    assert {n: ms for n, ms in seen.items() if len(ms) > 1} == {}


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def test_no_module_over_600_lines_and_no_function_over_80():
    """The house rule: modules of at most ~600 lines, functions of at most ~80."""
    long_modules, long_functions = [], []
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text()
        rel = str(path.relative_to(PKG.parent))
        if text.count("\n") > MAX_MODULE_LINES:
            long_modules.append(f"{rel}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long_functions.append(f"{rel}:{node.lineno} {node.name}: {n} lines")
    assert (long_modules, long_functions) == ([], [])


DEVICE_MODULES = ("cupy", "cuda")    # CuPy and NVIDIA's CUDA Python bindings


def _external_imports(path: Path) -> set[str]:
    """The absolute module names a file imports (inside functions too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def test_no_topic_touches_the_device_but_through_the_core():
    """The device boundary: a topic's buffers, readback, launches and tensor maps go through
    core.runner's Runner; no topic imports CuPy, the CUDA bindings or core.driver."""
    bad = []
    for path in sorted((PKG / "topics").rglob("*.py")):
        mod = _module_name(path)
        bad += [f"{mod} -> {name}" for name in sorted(_external_imports(path))
                if name.split(".")[0] in DEVICE_MODULES]
        bad += [f"{mod} -> {t}" for t in sorted(imports()[mod]) if t == f"{NAME}.core.driver"]
    assert bad == []


def _topic_trees():
    for path in sorted((PKG / "topics").rglob("*.py")):
        yield _module_name(path), ast.parse(path.read_text(), str(path))


def test_topics_make_figures_only_through_the_measurement_constructors():
    """Every figure through Measurement.of_fit / of_rate / of_value (results/judge.py), each
    with its own spread: no topic calls Measurement(...) itself."""
    bad = [f"{mod}:{n.lineno}" for mod, tree in _topic_trees() for n in ast.walk(tree)
           if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
           and n.func.id == "Measurement"]
    assert bad == []


def test_the_never_executed_rule_lives_in_the_core():
    """A topic leaves never-executed SASS out through core.loop (predicated_off,
    never_executed), never by a predicate string of its own."""
    bad = [f"{mod}:{n.lineno}" for mod, tree in _topic_trees() for n in ast.walk(tree)
           if isinstance(n, ast.Constant) and n.value in ("@!PT", "@!UPT")]
    assert bad == []
