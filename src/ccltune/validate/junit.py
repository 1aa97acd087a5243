"""JUnit XML for a validate verdict: one testcase per (collective, nRanks, nNodes, size),
a <failure> where the rules are slower, an <error> where a side is missing. Built with
xml.etree so CI systems (Jenkins, GitLab, GitHub) read it unchanged."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ccltune.sizes import format_size
from ccltune.validate.verdict import SizeVerdict, Verdict


def to_junit(v: Verdict, suite: str = "ccltune.validate") -> str:
    fails = sum(s.status == "FAIL" for s in v.sizes)
    errors = sum(s.status == "ERROR" for s in v.sizes)
    root = ET.Element("testsuites", name=suite, tests=str(len(v.sizes)), failures=str(fails), errors=str(errors))
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(v.sizes)), failures=str(fails),
                       errors=str(errors), skipped="0")
    for s in v.sizes:
        tc = ET.SubElement(ts, "testcase", classname=f"{suite}.{s.collective}.nranks{s.n_ranks}.nnodes{s.n_nodes}",
                           name=f"{s.collective} {format_size(s.size_bytes)}B",
                           time=f"{(s.rules.median_us if s.rules else 0.0) / 1e6:.9f}")
        if s.status == "FAIL":
            ET.SubElement(tc, "failure", message=s.reason, type="slower").text = _detail(s)
        elif s.status == "ERROR":
            ET.SubElement(tc, "error", message=s.reason, type="missing")
        else:
            ET.SubElement(tc, "system-out").text = s.reason
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _detail(s: SizeVerdict) -> str:
    d = s.to_dict()
    return (f"default {d['default_time_us']:.2f} us over {d['default_reps']} reps, "
            f"rules {d['rules_time_us']:.2f} us over {d['rules_reps']} reps, speedup {d['speedup']:.3f}x")
