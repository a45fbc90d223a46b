"""`make test-durations`: the slowest tests of the last `make test`, from its JUnit reports.

Reads data/test-reports/*.xml (one per pass, written by scripts/test-passes.sh) and prints the
N slowest test cases (default 20) with their pass, and each pass's summed test time.
Usage: python scripts/test_durations.py [N]
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPORTS = Path(__file__).resolve().parents[1] / "data" / "test-reports"


def cases(report: Path) -> list[tuple[float, str]]:
    """Return `(seconds, "file::name")` of every test case in one JUnit report."""
    out = []
    for case in ET.parse(report).iter("testcase"):
        where = (case.get("classname") or "").replace(".", "/") + ".py::" + (case.get("name") or "")
        out.append((float(case.get("time") or 0.0), where))
    return out


def main(argv: list[str]) -> int:
    """Print the slowest tests; answer 1 when there is no report yet."""
    count = int(argv[1]) if len(argv) > 1 else 20
    reports = sorted(REPORTS.glob("*.xml"))
    if not reports:
        print(f"no reports in {REPORTS}: run make test first")
        return 1
    rows = []
    for report in reports:
        found = cases(report)
        print(f"{report.stem:<10} {len(found):>5} tests, {sum(t for t, _ in found):8.1f} s of test time")
        rows += [(seconds, report.stem, where) for seconds, where in found]
    print(f"\nthe {count} slowest:")
    for seconds, name, where in sorted(rows, reverse=True)[:count]:
        print(f"{seconds:8.2f} s  {name:<9} {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
