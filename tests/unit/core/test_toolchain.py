"""toolchain: missing tools are answered with the install command; ptxas errors carry its log."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import toolchain


@pytest.fixture
def no_tools(monkeypatch):
    toolchain.all_tools.cache_clear()
    monkeypatch.setattr(toolchain, "all_tools", lambda name: ())
    yield
    monkeypatch.undo()
    toolchain.all_tools.cache_clear()


@pytest.mark.parametrize("name", ["ptxas", "nvdisasm"])
def test_missing_tool_names_the_install_command(no_tools, name):
    with pytest.raises(toolchain.ToolMissing) as ei:
        toolchain.find(name, "sm_80")
    msg = str(ei.value)
    assert name in msg and "sm_80" in msg
    assert toolchain.INSTALL_STATIC in msg
    assert msg.count("pip install") == 1


def test_missing_legacy_tool_names_the_legacy_extra(no_tools):
    with pytest.raises(toolchain.ToolMissing) as ei:
        toolchain.find("ptxas", "sm_61")
    assert toolchain.INSTALL_LEGACY in str(ei.value)


def test_describe_without_tools(no_tools):
    lines = toolchain.describe()
    assert lines == [f"ptxas: not found (install: {toolchain.INSTALL_STATIC})",
                     f"nvdisasm: not found (install: {toolchain.INSTALL_STATIC})"]


def test_find_validates_the_arch():
    from pytest_gpuchar.core.archs import UnknownArch
    with pytest.raises(UnknownArch):
        toolchain.find("ptxas", "sm_99x")


def _tool(version: str) -> toolchain.Tool:
    return toolchain.Tool("ptxas", "/x/ptxas", version, "test")


@pytest.mark.parametrize("version, target, ok", [
    ("13.5.37", "sm_75", True), ("13.5.37", "sm_90", True), ("13.5.37", "sm_70", False),
    ("13.5.37", "sm_50", False), ("12.4.99", "sm_50", True), ("12.4.99", "sm_90", True),
    ("12.4.99", "sm_120", False), ("12.8.61", "sm_120", True), ("11.8.89", "sm_86", True),
    ("11.8.89", "sm_90", False),
])
def test_supports(version, target, ok):
    assert toolchain._supports(_tool(version), target) is ok


def test_find_prefers_first_tool_that_handles_the_arch(monkeypatch):
    new, old = _tool("13.5.37"), _tool("12.4.99")
    monkeypatch.setattr(toolchain, "all_tools", lambda name: (new, old))
    assert toolchain.find("ptxas", "sm_80") is new
    assert toolchain.find("ptxas", "sm_61") is old
    assert toolchain.compiler_tag(new) == "ptxas-13.5.37"


def _ptxas_or_skip(arch: str) -> toolchain.Tool:
    toolchain.all_tools.cache_clear()
    try:
        return toolchain.find("ptxas", arch)
    except toolchain.ToolMissing:
        pytest.skip(f"no ptxas for {arch}: {toolchain.INSTALL_STATIC}")


BROKEN = """.version 7.1
.target sm_80
.address_size 64
.visible .entry broken()
{
  .reg .b32 %r<2>;
  add.u32 %r0, %r1, %nosuchreg;
  ret;
}
"""


def test_assemble_broken_ptx_raises_with_ptxas_log():
    tool = _ptxas_or_skip("sm_80")
    with pytest.raises(toolchain.AssemblyError) as ei:
        toolchain.assemble(BROKEN, "sm_80")
    msg = str(ei.value)
    assert f"ptxas {tool.version} failed for sm_80" in msg
    assert "nosuchreg" in msg          # ptxas's own log
    assert "error" in msg.lower()


def test_assemble_and_disassemble_valid_ptx():
    _ptxas_or_skip("sm_80")
    try:
        toolchain.find("nvdisasm", "sm_80")
    except toolchain.ToolMissing:
        pytest.skip(f"no nvdisasm for sm_80: {toolchain.INSTALL_STATIC}")
    good = BROKEN.replace("%nosuchreg", "%r1").replace("broken", "fine")
    cubin = toolchain.assemble(good, "sm_80")
    assert cubin[:4] == b"\x7fELF"
    text = toolchain.disassemble(cubin, "sm_80")
    assert ".text.fine" in text and "EXIT" in text


def test_a_spawn_that_fails_with_efault_is_retried(monkeypatch):
    """EFAULT from vfork+exec in a threaded process ran nothing: the start is tried again;
    any other error, or EFAULT every time, is raised."""
    import errno
    import subprocess
    real, calls = subprocess.Popen, []

    def flaky(*a, **kw):
        calls.append(a[0])
        if len(calls) < 3:
            raise OSError(errno.EFAULT, "Bad address")
        return real(*a, **kw)

    monkeypatch.setattr(subprocess, "Popen", flaky)
    done = toolchain.run(["true"], timeout=10)
    assert done.returncode == 0 and len(calls) == 3

    def always(*a, **kw):
        raise OSError(errno.EFAULT, "Bad address")

    monkeypatch.setattr(subprocess, "Popen", always)
    with pytest.raises(OSError):
        toolchain.run(["true"], timeout=10)

    def missing(*a, **kw):
        calls.append("missing")
        raise FileNotFoundError(errno.ENOENT, "no such file")

    calls.clear()
    monkeypatch.setattr(subprocess, "Popen", missing)
    with pytest.raises(FileNotFoundError):
        toolchain.run(["nope"], timeout=10)
    assert calls == ["missing"]
