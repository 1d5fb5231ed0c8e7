"""The slowest tests of a run from its JUnit XML: each test's seconds, module and name, and
the sum over every test. Usage: python3 tools/gpu-host/slowest_tests.py RUN.xml [N] [TITLE]"""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def main() -> None:
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    title = sys.argv[3] if len(sys.argv) > 3 else "tests"
    rows = sorted(((float(c.get("time")), c.get("classname").rsplit(".", 1)[-1], c.get("name"))
                   for c in ET.parse(path).iter("testcase")), reverse=True)
    print(f"\n== slowest {top} {title} (sum {sum(r[0] for r in rows):.1f} s, {len(rows)} tests)")
    for t, mod, name in rows[:top]:
        print(f"{t:7.2f} {mod} {name}")


if __name__ == "__main__":
    main()
