"""Published figures beside an expectation: an entry's ``literature:`` list.

A paper's number for the same characteristic is often not the suite's figure: another board,
another compiler, another method (a dependent chain of intrinsics whose SASS was never read,
a "latency" that is an issue interval). The entry keeps the paper's value with where it is
printed and how it was measured, so a reader who meets the paper's number finds the difference
beside the measurement; it is shown in the report and never judged.

Each item::

    - value: 8               # or  range: [lo, hi]
      unit: cycles/op        # optional: the entry's unit when left out
      source: luo24 Table X (H800)
      method: how the paper measured it, and how that differs from the suite's method
      device: H800           # optional: the paper's board
      note: ...              # optional
"""
from __future__ import annotations

from dataclasses import dataclass

from .finite import number

KEYS = {"value", "range", "unit", "source", "method", "note", "device"}


class LiteratureError(ValueError):
    """A malformed item: `field` names the item's field at fault ("" for the item)."""

    def __init__(self, field: str, msg: str) -> None:
        super().__init__(msg)
        self.field = field


@dataclass(frozen=True)
class Literature:
    unit: str
    source: str
    method: str
    value: float | None = None
    range: tuple[float, float] | None = None
    note: str = ""
    device: str = ""

    def describe(self) -> str:
        fig = f"{self.value:g}" if self.value is not None else \
            f"{self.range[0]:g}-{self.range[1]:g}"
        return f"{fig} {self.unit}" + (f" ({self.device})" if self.device else "")

    def as_dict(self) -> dict:
        """Plain JSON-able form (a result's `literature` list)."""
        d = {"figure": self.describe(), "unit": self.unit, "source": self.source,
             "method": self.method}
        if self.value is not None:
            d["value"] = self.value
        if self.range is not None:
            d["range"] = list(self.range)
        d.update({k: v for k, v in (("note", self.note), ("device", self.device)) if v})
        return d


def _number(field: str, v) -> float:
    x = number(v)
    if x is None:
        raise LiteratureError(field, f"expected a finite number, got {v!r}")
    return x


def from_mapping(item, unit: str, units: set[str]) -> Literature:
    """One item (a mapping of plain values) as a Literature; `unit` is the entry's, `units`
    the units an expectation may have. LiteratureError names the field at fault."""
    if not isinstance(item, dict):
        raise LiteratureError("", "expected a mapping with value (or range), source and method")
    for k in item:
        if k not in KEYS:
            raise LiteratureError(str(k), f"unknown field; allowed: {', '.join(sorted(KEYS))}")
    for need in ("source", "method"):
        if need not in item:
            raise LiteratureError("", f"missing '{need}' (where the paper prints the figure "
                                      f"and how it measured it)")
    if ("value" in item) == ("range" in item):
        raise LiteratureError("", "give one of 'value' or 'range'")
    value = rng = None
    if "value" in item:
        value = _number("value", item["value"])
    else:
        r = item["range"]
        if not isinstance(r, list) or len(r) != 2:
            raise LiteratureError("range", "expected [low, high]")
        lo, hi = (_number("range", x) for x in r)
        if lo > hi:
            raise LiteratureError("range", f"low {lo:g} > high {hi:g}")
        rng = (lo, hi)
    text = {}
    for k in ("unit", "source", "method", "note", "device"):
        if k in item:
            if not isinstance(item[k], str) or not item[k].strip():
                raise LiteratureError(k, "expected non-empty text")
            text[k] = item[k].strip()
    lit_unit = text.get("unit", unit)
    if lit_unit not in units:
        raise LiteratureError("unit", f"unknown unit {lit_unit!r}; one of "
                                      f"{', '.join(sorted(units))}")
    return Literature(lit_unit, text["source"], text["method"], value, rng,
                      text.get("note", ""), text.get("device", ""))
