"""Measure `ccltune links` against its targets on the GPU machine and print one line per target.

    python bench/links_bench.py [--json OUT.json]

Targets (4 x H200, NVLS off): copy-engine pair bandwidth >= 98% of 385 GB/s, SM copy kernel as
close as possible to the NVLink limit (478 GB/s; ratio reported), whole matrix in <= 30 s.
Exit 1 when a hard target (CE, time) is missed. Needs the project installed (pip install -e .).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from ccltune.cli import main as ccltune

CE_REFERENCE_GBPS = 385.0  # copy-engine copy between one H200 pair, 256 MB (reference benchmark)
CE_TARGET_RATIO = 0.98
NVLINK_LIMIT_GBPS = 478.0  # 18 links x 26.5625 GB/s, one direction
TIME_TARGET_S = 30.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also keep the links JSON here")
    args = parser.parse_args()
    for k, v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}.items():
        os.environ.setdefault(k, v)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.json or os.path.join(tmp, "links.json")
        rc = ccltune(["links", "--db", os.path.join(tmp, "links.db"), "--json", out])
        with open(out, encoding="utf-8") as fh:
            result = json.load(fh)
    series = result["summary"].get("series", {})
    if rc != 0 or "ce/uni" not in series:
        print(f"links did not complete (exit {rc}): {[c['evidence'] for c in result['checks']]}", file=sys.stderr)
        return 1
    ce = series["ce/uni"]["median_gbps"]
    ce_min = series["ce/uni"]["min_gbps"]
    elapsed = result["summary"]["command_s"]
    ok_ce = ce_min >= CE_TARGET_RATIO * CE_REFERENCE_GBPS
    ok_time = elapsed <= TIME_TARGET_S
    print(f"ce pair bandwidth: median {ce:.1f}, min {ce_min:.1f} GB/s; target >= {CE_TARGET_RATIO:.0%} of "
          f"{CE_REFERENCE_GBPS:g} = {CE_TARGET_RATIO * CE_REFERENCE_GBPS:.1f}: {'met' if ok_ce else 'MISSED'}")
    for method in ("sm-read", "sm-write"):
        s = series.get(f"{method}/uni")
        if s:
            print(f"{method} bandwidth: median {s['median_gbps']:.1f} GB/s = {s['median_gbps'] / NVLINK_LIMIT_GBPS:.1%} "
                  f"of the {NVLINK_LIMIT_GBPS:g} GB/s NVLink limit")
    print(f"whole matrix: {elapsed:.1f} s; target <= {TIME_TARGET_S:g} s: {'met' if ok_time else 'MISSED'}")
    print(f"ring ceiling: {result['summary'].get('ring_ceiling_gbps', 0):.1f} GB/s per GPU")
    return 0 if ok_ce and ok_time else 1


if __name__ == "__main__":
    sys.exit(main())
