"""Prints one short line per failed or erroring test of a pytest JUnit XML
report, so the last lines of a CI log name what failed (pytest's own summary
can be buried under a long assertion repr)."""

import sys
import xml.etree.ElementTree as ET

failed = 0
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    for kind in ("failure", "error"):
        node = case.find(kind)
        if node is not None:
            failed += 1
            message = " ".join((node.get("message") or "").split())[:240]
            print(f"{kind.upper()}: {case.get('classname')}::{case.get('name')}: {message}")
print(f"{failed} failed or erroring test(s)")
