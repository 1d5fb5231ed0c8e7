"""The install line a message gives for an extra, in the form the user installed the package:
the README's ``pip install -e ".[static]"`` in a source checkout (an editable install), the
package by name from the index otherwise (``pip install "pytest-gpuchar[static]"``)."""
from __future__ import annotations

import functools
import json
from importlib import metadata

DIST = "pytest-gpuchar"


def in_checkout() -> bool:
    """The package runs from a source checkout: its pyproject.toml beside the package."""
    from pathlib import Path
    return (Path(__file__).resolve().parents[2] / "pyproject.toml").is_file()


@functools.lru_cache(maxsize=None)
def editable() -> bool:
    """Whether this package is an editable install (PEP 660 / PEP 610's direct_url.json), or
    runs from a source checkout (pyproject.toml beside the package: a build's egg-info in the
    checkout, found first on sys.path, has no direct_url.json)."""
    if in_checkout():
        return True
    try:
        text = metadata.distribution(DIST).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return True       # run from a checkout that was never installed: the README's form
    try:
        return bool(json.loads(text or "{}").get("dir_info", {}).get("editable"))
    except (ValueError, AttributeError):
        return False


def line(extras: str) -> str:
    """`pip install` of these extras ("static", "static,legacy", "cuda13")."""
    if editable():
        return f'pip install -e ".[{extras}]"'
    return f'pip install "{DIST}[{extras}]"'
