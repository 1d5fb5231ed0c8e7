"""The tolerance a tensor figure records for a new expectation entry, by kind
(expectations/tolerances.yaml, section tensor)."""
from __future__ import annotations

from ...results import tolerances


def tol(kind: str) -> dict:
    return tolerances.of("tensor", kind)
