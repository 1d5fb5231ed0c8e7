"""values: input buffers are seeded, never zero, and in the documented ranges."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuchar.core import values
from pytest_gpuchar.core.ptx import InputSlot

NONZERO_KINDS = ("int", "small", "nonzero", "pos", "float", "near1", "unit")
FLOAT_DTYPES = {16: np.float16, 32: np.float32, 64: np.float64}
UINT_DTYPES = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _slots(kind: str, widths=(16, 32, 64), per_width: int = 20) -> list[InputSlot]:
    out = []
    for w in widths:
        for _ in range(per_width):
            out.append(InputSlot(len(out), w, kind))
    return out


def _decode(buf: bytes, slots: list[InputSlot], float_view: bool):
    words = np.frombuffer(buf, dtype="<u8")
    assert len(words) == len(slots)
    vals = []
    for s, w in zip(slots, words):
        raw = np.array([w & ((1 << s.width) - 1)], dtype=np.uint64).astype(UINT_DTYPES[s.width])
        vals.append(float(raw.view(FLOAT_DTYPES[s.width])[0]) if float_view else int(raw[0]))
    return vals


@pytest.mark.parametrize("kind", NONZERO_KINDS)
def test_no_zero_slot(kind):
    slots = _slots(kind)
    buf = values.input_buffer(slots, seed=1)
    assert len(buf) == 8 * len(slots)
    for s, v in zip(slots, _decode(buf, slots, float_view=False)):
        assert v != 0, f"slot {s.slot} ({kind}, {s.width} bits) is zero"


@pytest.mark.parametrize("kind", NONZERO_KINDS + ("bool",))
def test_deterministic_for_a_seed(kind):
    slots = _slots(kind)
    assert values.input_buffer(slots, seed=7) == values.input_buffer(slots, seed=7)
    assert values.input_buffer(slots) == values.input_buffer(slots)


def test_different_seeds_differ():
    slots = _slots("int")
    assert values.input_buffer(slots, seed=1) != values.input_buffer(slots, seed=2)


@pytest.mark.parametrize("kind, lo, hi", [
    ("float", 1.0, 2.0),
    ("near1", 1.0, 1.001),
])
def test_float_kinds_in_range(kind, lo, hi):
    slots = _slots(kind)
    for s, x in zip(slots, _decode(values.input_buffer(slots), slots, float_view=True)):
        assert np.isfinite(x)
        assert lo <= x <= hi, f"{kind} {s.width}-bit value {x} outside [{lo}, {hi}]"


def test_unit_kind_in_range_without_zero():
    slots = _slots("unit")
    xs = _decode(values.input_buffer(slots), slots, float_view=True)
    for x in xs:
        assert 0.09 <= abs(x) <= 0.91
    assert any(x < 0 for x in xs) and any(x > 0 for x in xs)


def test_float_values_are_normal():
    for kind in ("float", "near1", "unit"):
        slots = _slots(kind)
        for s, x in zip(slots, _decode(values.input_buffer(slots), slots, float_view=True)):
            assert abs(x) >= np.finfo(FLOAT_DTYPES[s.width]).tiny


def test_small_and_pos_ranges():
    small = _slots("small")
    assert all(1 <= v < 16 for v in _decode(values.input_buffer(small), small, False))
    pos = _slots("pos")
    for s, v in zip(pos, _decode(values.input_buffer(pos), pos, False)):
        assert (1 << (s.width // 2)) <= v < (1 << (s.width - 2))


def test_bool_and_predicates_are_bits():
    slots = [InputSlot(k, 1, "int") for k in range(10)] + [InputSlot(10 + k, 32, "bool")
                                                          for k in range(10)]
    words = np.frombuffer(values.input_buffer(slots), dtype="<u8")
    assert set(words.tolist()) <= {0, 1}


def test_values_fit_their_width():
    for kind in NONZERO_KINDS:
        slots = _slots(kind)
        words = np.frombuffer(values.input_buffer(slots), dtype="<u8")
        for s, w in zip(slots, words):
            assert int(w) < (1 << s.width)


def test_empty_slots_give_one_slot():
    assert values.input_buffer([]) == bytes(8)


def test_unknown_kind_raises():
    with pytest.raises(ValueError, match="unknown operand value kind"):
        values.input_buffer([InputSlot(0, 32, "huge")])
