"""The plugin's option values and environment variables, checked before any test: a value
that cannot be used is a usage error (pytest's exit 4) in one line naming the option or
variable and what it takes, not an internal error or a traceback at the end of the run."""
from __future__ import annotations

import os
from pathlib import Path

import pytest


def _usage(what: str, value, takes: str) -> pytest.UsageError:
    return pytest.UsageError(f"{what}: {value!r} {takes}")


def device_index(option: str | None) -> int | None:
    """--gpuchar-device, else $GPUCHAR_DEVICE (checked here; read by core/device.py), as a
    GPU index (None: not given)."""
    for what, raw in (("--gpuchar-device", option),
                      ("GPUCHAR_DEVICE", os.environ.get("GPUCHAR_DEVICE"))):
        if raw is None:
            continue
        try:
            idx = int(str(raw).strip())
        except ValueError:
            raise _usage(what, raw, "is not a GPU index (0, 1, ...)") from None
        if idx < 0:
            raise _usage(what, raw, "is not a GPU index (0, 1, ...)")
        if what == "--gpuchar-device":
            return idx
    return None


def positive(config: pytest.Config, dest: str, option: str, *, whole: bool) -> float:
    value = config.getoption(dest)
    if value <= 0:
        raise _usage(option, value, "must be a " + ("whole number, 1 or more" if whole else
                                                    "number of seconds above 0"))
    return value


def report_dir(raw: str | None) -> Path | None:
    """--gpuchar-report DIR (or the ini's), made now: a path that is a file or cannot be made is
    said before the run, not as a traceback after it."""
    if not raw:
        return None
    path = Path(raw)
    if path.exists() and not path.is_dir():
        raise _usage("--gpuchar-report", raw, "is a file: give a directory for the report")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _usage("--gpuchar-report", raw, f"cannot be made: {e.strerror or e}: give a "
                                              "writable directory") from None
    return path


def environment_dirs() -> None:
    """GPUCHAR_EXPECTATIONS is a directory; GPUCHAR_LISTING_CACHE (unless 0 or empty) is one
    or can be made (a cache that silently keeps nothing was a cache the user thought set)."""
    exp = os.environ.get("GPUCHAR_EXPECTATIONS")
    if exp and not Path(exp).is_dir():
        raise _usage("GPUCHAR_EXPECTATIONS", exp, "is not a directory: give the directory of "
                                                  "the expectation files (sm_XX.yaml)")
    cache = os.environ.get("GPUCHAR_LISTING_CACHE")
    if cache is None or cache.strip() in ("", "0"):
        return
    if Path(cache).exists() and not Path(cache).is_dir():
        raise _usage("GPUCHAR_LISTING_CACHE", cache, "is a file: give a directory, or 0 for "
                                                     "no cache")
    try:
        Path(cache).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _usage("GPUCHAR_LISTING_CACHE", cache, f"cannot be made: {e.strerror or e}: "
                                                     f"give a writable directory, or 0 for "
                                                     f"no cache") from None
