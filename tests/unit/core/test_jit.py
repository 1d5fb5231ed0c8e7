"""The driver-JIT link (core/jit.py) through NVIDIA's bindings: the JIT options are the ones
every probe has been linked with (so the driver compiles the same cubin), the logs come back
through our buffers, the cubin is copied out of the link state before it is destroyed, and a
refusal names the typed CUresult and carries the JIT log. The calls that need libcuda are
answered by a stand-in (no GPU here); the option enums are the real binding's."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuchar.core import bindings, jit

cb = pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings (extra test) is needed")
R = cb.CUresult
CUBIN = b"\x7fELF" + bytes(range(256)) * 3


class Api:
    """cuda.bindings.driver with the link calls answered here, as the driver would: the info
    log written into the buffer given to cuLinkCreate, the cubin in memory the state owns."""

    def __init__(self, fail: str = "", log: bytes = b"ptxas info: 0 bytes stack frame") -> None:
        self.fail, self.log = fail, log
        self.calls = []
        self.image = np.frombuffer(CUBIN, np.uint8).copy()

    def __getattr__(self, name):
        return getattr(cb, name)

    def cuLinkCreate(self, n, options, values):
        self.calls.append(("cuLinkCreate", n, list(options), list(values)))
        self.buffers = dict(zip([int(o) for o in options], values))
        return R.CUDA_SUCCESS, cb.CUlinkState()

    def cuLinkAddData(self, state, kind, data, size, name, n, options, values):
        self.calls.append(("cuLinkAddData", kind, bytes(data), size, name, n, options, values))
        if self.fail == "add":
            self.buffers[jit.CU_JIT_ERROR_LOG_BUFFER][:19] = b"ptxas fatal: syntax"
            return (R.CUDA_ERROR_INVALID_PTX,)
        return (R.CUDA_SUCCESS,)

    def cuLinkComplete(self, state):
        self.calls.append(("cuLinkComplete",))
        self.buffers[jit.CU_JIT_INFO_LOG_BUFFER][:len(self.log)] = self.log
        return R.CUDA_SUCCESS, bindings.address_of(self.image), len(CUBIN)

    def cuLinkDestroy(self, state):
        self.calls.append(("cuLinkDestroy",))
        self.image[:] = 0            # the cubin belongs to the state: gone after this
        return (R.CUDA_SUCCESS,)

    def cuGetErrorString(self, code):
        return R.CUDA_SUCCESS, b"a PTX JIT compilation failed"


def test_the_link_options_are_the_ones_every_probe_was_linked_with():
    api = Api()
    cubin, info = jit.link_with(api, ".version 8.0\n.target sm_90\n", "t.ptx")
    _, n, options, values = api.calls[0]
    assert n == 5 and [int(o) for o in options] == [3, 4, 5, 6, 12]
    assert all(isinstance(o, cb.CUjit_option) for o in options)
    assert [o.name for o in options] == [
        "CU_JIT_INFO_LOG_BUFFER", "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES", "CU_JIT_ERROR_LOG_BUFFER",
        "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES", "CU_JIT_LOG_VERBOSE"]
    assert isinstance(values[0], bytearray) and len(values[0]) == jit.LOG_BYTES
    assert values[1] == values[3] == jit.LOG_BYTES and values[4] == 1
    add = api.calls[1]
    assert add[1] == cb.CUjitInputType.CU_JIT_INPUT_PTX
    assert add[2] == b".version 8.0\n.target sm_90\n\0" and add[3] == len(add[2])
    assert add[4] == b"t.ptx" and add[5:] == (0, None, None)
    assert cubin == CUBIN                       # copied before cuLinkDestroy cleared it
    assert info == "ptxas info: 0 bytes stack frame"
    assert [c[0] for c in api.calls] == ["cuLinkCreate", "cuLinkAddData", "cuLinkComplete",
                                         "cuLinkDestroy"]


def test_a_refused_ptx_names_the_typed_result_and_carries_the_log():
    api = Api(fail="add")
    with pytest.raises(jit.JITError) as e:
        jit.link_with(api, "bad", "probe/x.ptx")
    msg = str(e.value)
    assert msg.startswith("cuLinkAddData(probe/x.ptx) failed: CUDA_ERROR_INVALID_PTX (218): "
                          "a PTX JIT compilation failed")
    assert msg.endswith("JIT log:\nptxas fatal: syntax")
    assert api.calls[-1] == ("cuLinkDestroy",)     # the state is destroyed on failure too


def test_log_text_stops_at_the_first_nul():
    buf = bytearray(16)
    buf[:5] = b"hello"
    assert jit.log_text(buf) == "hello" and jit.log_text(bytearray(4)) == ""


def test_host_bytes_copies_memory_at_an_address():
    a = np.arange(40, dtype=np.uint8)
    b = bindings.host_bytes(bindings.address_of(a) + 3, 5)
    a[:] = 0
    assert b == bytes([3, 4, 5, 6, 7]) and bindings.host_bytes(0, 0) == b""
    with pytest.raises(ValueError, match="NULL"):
        bindings.host_bytes(0, 4)
