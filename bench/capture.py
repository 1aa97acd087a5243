"""How much of the sweep's available gain the tuned rules capture, on the sweep and in validate.

    python bench/capture.py SWEEP_DB VALIDATE_JSON [--rules RULES]

For every group of the sweep database (``ccltune tune``'s derivation with its defaults; or the
rules of ``--rules``, matched with the plugin's first-match semantics), and every measured size,
the *available* saving is ``1 - t_best / t_default`` of the fastest candidate measured there
(NCCL's A/A twin excluded), with sweep medians. A size counts where that best candidate beats
the default *beyond noise*; four readings of "noise" are reported, from the loosest to what
``ccltune tune`` itself applies:

``point``     the two points' own spread (half range of the repetitions, summed);
``aa``        also the A/A gap (NCCL's default on two communicators) beyond both points' own
              noise, at that size and its neighbours (derive's ``aa_margin``, docs/tuning.md);
              and the best candidate must beat the faster of the two (a candidate only as fast as NCCL's default on another communicator shows a
              slow communicator, not a better choice);
``aa+0.5us``  also a saving of at least 0.5 us per call;
``tune``      what ``ccltune tune`` requires of a rule: also a 2% floor, and 10% for a win no
              neighbouring size corroborates.

The *captured* saving at a size is, on the sweep, ``1 - t_selected / t_default`` of what the
rules select there (NCCL's default where none matches), and, in validate, ``1 - t_rules /
t_default`` as validate measured it (its own interleaved A/B). Capture is the sum of captured
savings over the sum of available savings, over the sizes that count. Savings are fractions,
so every size weighs alike whatever its time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ccltune.rules import load as load_rules
from ccltune.stats import beats
from ccltune.store import Store
from ccltune.tune.derive import MIN_GAIN_US, aa_margin, account_gain, derive, gpu_model, nccl_best

LEVELS = ("point", "aa", "aa+0.5us", "tune")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("validate_json")
    ap.add_argument("--rules", help="a rule file (default: derive them from the database as `ccltune tune` does)")
    args = ap.parse_args(argv)

    rows = []
    with Store(args.db, readonly=True) as store:
        for run in store.runs("sweep"):
            gpu = gpu_model(run.env, run.platform)
            rows.extend({**m, "gpu": gpu} for m in store.measurement_rows([run.id]))
    result = derive(rows)
    validated = {(s["collective"], int(s["n_ranks"]), int(s["size_bytes"])): s
                 for s in json.loads(Path(args.validate_json).read_text())["sizes"]}
    file_rules = load_rules(args.rules) if args.rules else None

    totals = {lv: defaultdict(float) for lv in LEVELS}
    print(f"{'group':<26} {'level':<9} {'sizes':>5} {'avail_%':>8} {'sweep_%':>8} {'valid_%':>8}"
          "  (capture: sweep, validate)")
    for g in result.groups:
        key = g.key
        # what the rules select at each size, and its saving on the sweep (the plugin's first match)
        selected = {sg.size_bytes: sg for sg in account_gain(g, None if file_rules is None else file_rules.rules).sizes}
        decisions = g.decisions
        gaps = [aa_margin(d.default, d.candidates) for d in decisions]
        per = {lv: defaultdict(float) for lv in LEVELS}
        for i, d in enumerate(decisions):
            best = d.best
            if best is None:
                continue
            _cand, bp = best
            near = [x for x in gaps[max(0, i - 1):i + 2] if x is not None]
            ref = nccl_best(d.default, d.candidates)  # NCCL's own choice, on the faster communicator
            saving_us = ref.median_us - bp.median_us
            counts = {
                "point": beats(d.default, bp, 0.0),
                "aa": beats(ref, bp, max(near, default=0.0)),
                "aa+0.5us": beats(ref, bp, max(near, default=0.0)) and saving_us >= MIN_GAIN_US,
                "tune": bool(d.qualifying),
            }
            on_sweep = selected[d.size_bytes].captured
            v = validated.get((key.collective, key.n_ranks, d.size_bytes))
            in_validate = (1.0 - v["rules_time_us"] / v["default_time_us"]) if v else 0.0
            available = 1.0 - bp.median_us / d.default.median_us
            for lv, yes in counts.items():
                if yes:
                    for t in (per[lv], totals[lv]):
                        t["n"] += 1
                        t["avail"] += available
                        t["sweep"] += on_sweep
                        t["valid"] += in_validate
        name = f"{key.collective} n={key.n_ranks}"
        for lv in LEVELS:
            _line(name, lv, per[lv])
    for lv in LEVELS:
        _line("ALL", lv, totals[lv])
    return 0


def _line(name: str, level: str, t: dict[str, float]) -> None:
    if not t["n"]:
        print(f"{name:<26} {level:<9} {0:>5} {'-':>8} {'-':>8} {'-':>8}")
        return
    a = t["avail"]
    print(f"{name:<26} {level:<9} {int(t['n']):>5} {100 * a:>8.1f} {100 * t['sweep'] / a:>8.1f}"
          f" {100 * t['valid'] / a:>8.1f}")


if __name__ == "__main__":
    sys.exit(main())
