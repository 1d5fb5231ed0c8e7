"""Fixtures shared by the unit tests."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest


class FakeCupy:
    """numpy in place of CuPy for the topics' runs on a fake GPU: arrays with .get(), the
    driver error type, events that are always done."""

    class Array(np.ndarray):
        def get(self):
            return np.asarray(self).copy()

    class CUDADriverError(Exception):
        pass

    def __init__(self):
        self.cuda = types.SimpleNamespace(
            driver=types.SimpleNamespace(CUDADriverError=self.CUDADriverError),
            Event=lambda: types.SimpleNamespace(record=lambda: None, done=True))

    def asarray(self, x):
        return np.asarray(x).view(self.Array)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype).view(self.Array)


@pytest.fixture
def fake_cupy(monkeypatch) -> FakeCupy:
    """A FakeCupy installed as the `cupy` module for the test."""
    cp = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    return cp
