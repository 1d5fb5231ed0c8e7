"""The declaration policy: what a probe or figure declared unmeasurable in an arch's
expectation files (``unmeasurable:``, for SASS of a named compiler) means when it is checked.
A declared probe whose verdict shows the declared SASS fact is skipped with the reason
(DeclaredUnmeasurable); one that is valid now makes the declaration stale, and that fails
(StaleDeclaration), so a compiler that stops doing the declared thing is noticed. The session
(a topic's Context) applies it through ``verify``, ``unmeasurable`` and ``not_declared``.

`store` is the session's expectation store (results.expectations.Store: ``load(arch)`` gives
the arch's expectations, whose ``unmeasurable`` maps a name to its declaration).
"""
from __future__ import annotations

from typing import Any

from . import sass
from .probe import DeclaredUnmeasurable, Probe
from .verify import ProbeInvalid, Verdict


class StaleDeclaration(AssertionError):
    """A probe declared unmeasurable is valid with this compiler: the declaration is stale."""


def declaration(store: Any, arch: str, name: str, compiler: str = ""):
    """The declaration of `name` on `arch` that applies to SASS of `compiler`, or None."""
    exp = store.load(arch)
    decl = exp.unmeasurable.get(name) if exp else None
    return decl if decl is not None and decl.applies(compiler) else None


def unmeasurable(store: Any, arch: str, name: str, verdict: str, compiler: str = "") -> None:
    """A probe or figure found invalid (`verdict`: the message and SASS saying why): when the
    arch's expectation files declare `name` unmeasurable (for SASS of this `compiler`) and the
    verdict shows the declared fact, raise DeclaredUnmeasurable (skipped with the reason,
    noted in the results); otherwise return and let the caller report it invalid. `name` is
    a probe's name, or a characteristic's key where a valid probe still gives no figure (the
    FP8 mma.sync accumulation the driver puts on the FPU)."""
    decl = declaration(store, arch, name, compiler)
    if decl and decl.explains(verdict):
        raise DeclaredUnmeasurable(f"unmeasurable on {arch}: {name}: {decl.reason}")


def not_declared(store: Any, arch: str, name: str, compiler: str = "") -> None:
    """`name` turned out measurable with this compiler: a declaration of it is stale and
    fails (StaleDeclaration)."""
    decl = declaration(store, arch, name, compiler)
    if decl:
        raise StaleDeclaration(
            f"{name} is declared unmeasurable at {decl.origin} ({decl.reason}), but "
            f"its SASS is valid with this compiler: the compiler no longer does it; remove "
            f"the declaration")


def verify(store: Any, probe: Probe, functions: dict, compiler: str) -> Verdict:
    """probe.check with the arch's declarations (see the module docstring)."""
    try:
        verdict = probe.check(functions)
    except (ProbeInvalid, sass.RegionError) as e:
        unmeasurable(store, probe.arch, probe.name, str(e), compiler)
        raise
    not_declared(store, probe.arch, probe.name, compiler)
    return verdict
