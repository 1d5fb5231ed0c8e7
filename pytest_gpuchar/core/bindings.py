"""NVIDIA's CUDA Python bindings (cuda-bindings, ``cuda.bindings.driver``): the one place the
driver API module is imported, a driver call's CUresult turned into the binding's typed name
and the driver's description, and host memory the driver owns copied into bytes.

cuda-bindings is in the ``cuda12`` / ``cuda13`` extras, next to CuPy, pinned to the major
version of the driver's CUDA. Importing this module imports nothing of CUDA."""
from __future__ import annotations

import numpy as np

from . import install

INSTALL = (f'{install.line("cuda13")} (or cuda12 for a CUDA 12 driver: '
           'cuda-bindings of the driver\'s CUDA major version)')


class BindingsMissing(RuntimeError):
    """cuda-bindings is not importable."""


def driver_api():
    """``cuda.bindings.driver``, or BindingsMissing naming the install command."""
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise BindingsMissing(f"NVIDIA's CUDA Python bindings are not importable "
                              f"({type(e).__name__}: {e}); {INSTALL}") from None
    return driver


def version() -> str:
    """The installed cuda-bindings version ("13.5.0"), or "" when it is not importable."""
    try:
        import cuda.bindings
    except ImportError:
        return ""
    return str(getattr(cuda.bindings, "__version__", ""))


def mismatch(bindings_version: str, driver_cuda: str) -> str:
    """Why these bindings cannot drive this driver ("" when they can): bindings of a newer CUDA
    major version than the driver's ask it for entry points it does not have."""
    try:
        b, d = int(bindings_version.split(".")[0]), int(driver_cuda.split(".")[0])
    except ValueError:
        return ""
    if b > d:
        return (f"cuda-bindings {bindings_version} is for CUDA {b} drivers, this driver speaks "
                f"CUDA {driver_cuda}: {install.line(f'cuda{d}')}")
    return ""


def result_name(api, code) -> tuple[int, str]:
    """(number, the binding's CUresult name) of a driver call's result."""
    num = int(code)
    try:
        return num, api.CUresult(num).name
    except ValueError:
        return num, f"CUresult {num}"


def describe(api, code) -> str:
    """The driver's own description of a CUresult (cuGetErrorString); "no description" when the
    driver cannot say (no libcuda, or a code it does not know)."""
    try:
        res, text = api.cuGetErrorString(api.CUresult(int(code)))
    except Exception:  # noqa: BLE001 - no driver library to describe it: the name stands alone
        return "no description"
    if int(res) != 0 or not text:
        return "no description"
    return text.decode(errors="replace") if isinstance(text, bytes) else str(text)


def failure(api, call: str, code) -> tuple[int, str, str, str]:
    """(number, name, description, "<call> failed: NAME (number): description")."""
    num, name = result_name(api, code)
    text = describe(api, code)
    return num, name, text, f"{call} failed: {name} ({num}): {text}"


class _HostMemory:
    """NumPy's array interface over `size` bytes of host memory at `address`."""

    def __init__(self, address: int, size: int) -> None:
        self.__array_interface__ = {"shape": (size,), "typestr": "|u1",
                                    "data": (address, True), "version": 3}


def host_bytes(address: int, size: int) -> bytes:
    """A copy of `size` bytes of host memory at `address` (a buffer the driver hands back, as
    cuLinkComplete's cubin)."""
    if size <= 0:
        return b""
    if not address:
        raise ValueError(f"host_bytes: NULL address for {size} bytes")
    return np.asarray(_HostMemory(int(address), int(size))).tobytes()


def address_of(array: np.ndarray) -> int:
    """The host address of a NumPy array's first byte."""
    return int(array.__array_interface__["data"][0])
