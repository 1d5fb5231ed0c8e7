"""archs: --gpu-arch values are canonicalised, unknown ones are answered with the valid list."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import archs


@pytest.mark.parametrize("given, canonical", [
    ("sm_80", "sm_80"),
    ("80", "sm_80"),
    ("compute_90", "sm_90"),
    ("  SM_86 ", "sm_86"),
    ("90a", "sm_90a"),
    ("compute_75", "sm_75"),
])
def test_validate_canonicalises(given, canonical):
    assert archs.validate(given) == canonical


@pytest.mark.parametrize("bad", ["sm_99x", "sm_81", "ampere", "", "compute_", "8.0"])
def test_unknown_arch_lists_valid_values(bad):
    with pytest.raises(archs.UnknownArch) as ei:
        archs.validate(bad)
    msg = str(ei.value)
    assert repr(bad) in msg
    assert "valid values" in msg
    for a in archs.KNOWN_ARCHS:
        assert a in msg


def test_unknown_arch_is_a_value_error():
    assert issubclass(archs.UnknownArch, ValueError)


def test_static_archs_are_known():
    assert set(archs.STATIC_ARCHS) <= set(archs.KNOWN_ARCHS)


@pytest.mark.parametrize("name, n", [("sm_86", 86), ("sm_90a", 90), ("sm_120", 120)])
def test_number(name, n):
    assert archs.number(name) == n


def test_number_rejects_non_arch():
    with pytest.raises(archs.UnknownArch):
        archs.number("ampere")


def test_ptx_isa_version_grows_with_arch():
    versions = [tuple(map(int, archs.ptx_isa_version(a).split(".")))
                for a in ("sm_70", "sm_80", "sm_89", "sm_90", "sm_100")]
    assert versions == sorted(versions)


@pytest.mark.parametrize("arch, version", [
    ("sm_90", "8.0"), ("sm_90a", "8.0"), ("sm_100", "8.7"), ("sm_100a", "8.7"),
    ("sm_103", "8.8"), ("sm_103a", "8.8"), ("sm_110", "9.0"), ("sm_120", "8.7"),
    ("sm_120a", "8.7"), ("sm_121", "8.8"), ("sm_121a", "8.8")])
def test_blackwell_ptx_isa_versions(arch, version):
    """The lowest PTX ISA each target accepts (8.7 rejects sm_103 and sm_121)."""
    assert archs.ptx_isa_version(arch) == version


def test_static_archs_include_blackwell():
    assert archs.STATIC_ARCHS[-4:] == ("sm_100", "sm_103", "sm_120", "sm_121")
    assert all(archs.validate(a) == a for a in ("sm_100a", "sm_103a", "sm_120a", "sm_121a"))
