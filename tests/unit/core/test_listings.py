"""Offline SASS listings on disk: keyed by everything that decides them, stored atomically,
read back by the next session instead of assembling again, never the cause of a failure."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time

import pytest

from pytest_gpuchar.core import build, listings, toolchain
from pytest_gpuchar.core.toolchain import Tool
from pytest_gpuchar.topics.instructions import kernels, rows


def _tool(tmp_path, name="ptxas", version="13.5.37", content=b"x"):
    path = tmp_path / f"{name}-{version}"
    path.write_bytes(content)
    return Tool(name, str(path), version, "test")


def test_the_key_names_arch_ptx_and_both_binaries(tmp_path):
    ptxas, nvdisasm = _tool(tmp_path), _tool(tmp_path, "nvdisasm")
    key = listings.ListingCache.key("sm_80", "ptx", ptxas, nvdisasm)
    assert key == listings.ListingCache.key("sm_80", "ptx", ptxas, nvdisasm)
    others = {listings.ListingCache.key("sm_86", "ptx", ptxas, nvdisasm),
              listings.ListingCache.key("sm_80", "ptx ", ptxas, nvdisasm),
              listings.ListingCache.key("sm_80", "ptx", _tool(tmp_path, version="13.0.88"),
                                        nvdisasm),
              listings.ListingCache.key("sm_80", "ptx", ptxas,
                                        _tool(tmp_path, "nvdisasm", "12.4.99"))}
    assert key not in others and len(others) == 4
    # the same version reinstalled (another binary at the same path) is another compiler
    (tmp_path / "ptxas-13.5.37").write_bytes(b"another build")
    assert listings.ListingCache.key("sm_80", "ptx", ptxas, nvdisasm) != key


def test_put_then_get_and_a_damaged_entry_is_dropped(tmp_path):
    cache = listings.ListingCache(tmp_path / "c")
    assert cache.get("ab" * 32) is None
    cache.put("ab" * 32, "listing\ntext\n")
    assert cache.get("ab" * 32) == "listing\ntext\n" and (cache.hits, cache.stored) == (1, 1)
    path = tmp_path / "c" / "ab" / f"{'ab' * 32}.sass.gz"
    path.write_bytes(gzip.compress(b"half")[:10])
    assert cache.get("ab" * 32) is None and not path.exists()
    assert not [p for p in (tmp_path / "c").rglob(".*")]


def test_a_write_that_fails_costs_nothing_but_the_entry(tmp_path, monkeypatch):
    cache = listings.ListingCache(tmp_path / "c")

    def full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(listings.os, "replace", full)
    cache.put("cd" * 32, "text")          # no exception: the run keeps its result
    assert cache.get("cd" * 32) is None and cache.stored == 0
    assert not [p for p in (tmp_path / "c").rglob("*") if p.is_file()]


def test_prune_drops_the_least_recently_used(tmp_path):
    cache = listings.ListingCache(tmp_path)
    for i, k in enumerate(("aa", "bb", "cc")):
        cache.put(k * 32, "x" * 1000 + k)
        p = tmp_path / k / f"{k * 32}.sass.gz"
        os.utime(p, (time.time() - 100 + i, time.time() - 100 + i))
    cache.get("aa" * 32)                   # read: now the most recent
    size = (tmp_path / "aa" / f"{'aa' * 32}.sass.gz").stat().st_size
    assert cache.prune(limit=2 * size) == 1
    assert cache.get("bb" * 32) is None and cache.get("aa" * 32) and cache.get("cc" * 32)


def test_from_config_env_and_pytest_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCHAR_LISTING_CACHE", "0")
    assert listings.from_config(object()) is None
    monkeypatch.setenv("GPUCHAR_LISTING_CACHE", str(tmp_path))
    assert listings.from_config(object()).root == tmp_path
    monkeypatch.delenv("GPUCHAR_LISTING_CACHE")
    assert listings.from_config(object()) is None          # -p no:cacheprovider

    class Cache:
        def mkdir(self, name):
            return tmp_path / name
    assert listings.from_config(type("C", (), {"cache": Cache()})()).root.name == "gpuchar-sass"


def test_a_second_session_reads_what_the_first_assembled(tmp_path, need_offline_tools):
    need_offline_tools("sm_80")
    probes = [kernels.latency_probe(rows.row(r), "sm_80") for r in ("add.u32", "fma.rn.f32")]
    group = build.Group("batch", "sm_80", probes)
    first = build.Builds(listings=listings.ListingCache(tmp_path))
    first.offline_groups([group])
    assert first.assembled == 1 and first.listings.stored == 1
    second = build.Builds(listings=listings.ListingCache(tmp_path))
    second.offline_groups([group])
    assert second.assembled == 0 and second.listings.hits == 1
    for p in probes:
        a, b = first.offline(p).functions, second.offline(p).functions
        assert {k: f.instrs for k, f in a.items()} == {k: f.instrs for k, f in b.items()}
        assert second.offline(p).functions and p.check(b).ok
    first.close()
    second.close()


def test_a_failed_assembly_is_not_stored(tmp_path, need_offline_tools):
    need_offline_tools("sm_80")
    b = build.Builds(listings=listings.ListingCache(tmp_path))
    bad = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() { bogus; }\n"
    for _ in range(2):
        with pytest.raises(toolchain.AssemblyError):
            b.offline_module("sm_80", bad, "bad")
    assert b.listings.stored == 0 and not list(tmp_path.rglob("*.gz"))


SESSION = r"""
import sys
from pytest_gpuchar.core import build, listings
from pytest_gpuchar.topics.instructions import kernels, rows
probes = [kernels.latency_probe(rows.row(r), "sm_80") for r in ("add.u32", "fma.rn.f32")]
b = build.Builds(listings=listings.ListingCache(sys.argv[1]))
print("ready", flush=True)
sys.stdin.readline()
b.offline_groups([build.Group("batch", "sm_80", probes)])
print(b.assembled, b.listings.hits, flush=True)
"""


def test_processes_sharing_the_cache_assemble_a_listing_once(tmp_path, need_offline_tools):
    """Two sessions (as two pytest-xdist workers) want the same module at the same moment:
    one assembles it, the other waits for its claim and reads what it stored."""
    need_offline_tools("sm_80")
    procs = [subprocess.Popen([sys.executable, "-c", SESSION, str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.communicate(timeout=120)[1][-2000:]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=120) for p in procs]
    counts = sorted(tuple(map(int, out.split())) for out, _ in outs)
    assert counts == [(0, 1), (1, 0)], outs        # (assembled, read from the cache)
    assert len(list(tmp_path.rglob("*.sass.gz"))) == 1


HOLDER = r"""
import sys, time
from pytest_gpuchar.core import listings
with listings.ListingCache(sys.argv[1]).claim("ab" * 32):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_claim_dies_with_the_process_that_held_it(tmp_path):
    """A worker killed while it assembles (a GPU fault, kill -9) leaves no claim behind."""
    import threading
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    taken = threading.Event()

    def claim():
        with listings.ListingCache(tmp_path).claim("ab" * 32):
            taken.set()
    waiter = threading.Thread(target=claim, daemon=True)
    waiter.start()
    assert not taken.wait(0.5)          # held by the other process: this one waits
    holder.kill()
    holder.wait(timeout=60)
    assert taken.wait(30)
