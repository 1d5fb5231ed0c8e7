"""The slowest tests of a run from its JUnit XML: each test's seconds, the GPU-busy seconds
the plugin recorded for it (the `gpuchar_busy_s` property; "-" where the test has none),
module and name, and the sums over every test.
Usage: python3 tools/gpu-host/slowest_tests.py RUN.xml [N] [TITLE]"""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def rows(path) -> list[tuple[float, float | None, str, str]]:
    """(seconds, GPU-busy seconds or None, module, name) of every test case, slowest first."""
    out = []
    for c in ET.parse(path).iter("testcase"):
        busy = [float(p.get("value")) for p in c.iter("property")
                if p.get("name") == "gpuchar_busy_s"]
        out.append((float(c.get("time")), sum(busy) if busy else None,
                    c.get("classname").rsplit(".", 1)[-1], c.get("name")))
    return sorted(out, key=lambda r: r[0], reverse=True)


def report(path, top: int = 25, title: str = "tests") -> str:
    rs = rows(path)
    busy = sum(r[1] or 0.0 for r in rs)
    lines = [f"\n== slowest {top} {title} (sum {sum(r[0] for r in rs):.1f} s, GPU busy "
             f"{busy:.1f} s, {len(rs)} tests)", "     s   busy  module test"]
    lines += [f"{t:6.2f} {'-' if b is None else f'{b:6.2f}':>6} {mod} {name}"
              for t, b, mod, name in rs[:top]]
    return "\n".join(lines)


def main() -> None:
    print(report(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25,
                 sys.argv[3] if len(sys.argv) > 3 else "tests"))


if __name__ == "__main__":
    main()
