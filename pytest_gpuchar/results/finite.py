"""A value as the results read it: a finite int or float, never a bool (JSON's true is
not 1 cycle) and never NaN or infinity (a figure that could not be computed)."""
from __future__ import annotations

import math


def number(v) -> float | None:
    """`v` as a float when it is a finite number, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(float(v)) else None
