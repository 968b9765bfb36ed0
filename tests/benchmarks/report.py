#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Prints holdfast's benchmark table from Google Benchmark JSON files.

    report.py [--markdown] SETTING=FILE[,FILE...] [SETTING=FILE[,FILE...] ...]

Each SETTING (e.g. "pinned", "unpinned") gets its own tables: ratios are only ever compared
within one setting, because pinning changes what a baseline costs. The files are the output of
`--benchmark_format=json --benchmark_repetitions=N --benchmark_report_aggregates_only=true`
(see tests/benchmarks/bench_common.hpp for the counters); a benchmark run once (the footprint
ones) is read from its single run.

Rows, by the counters a benchmark reports:
  ns_per_op + base_ns_per_op + ratio   paired: figure, same-run baseline, ratio, target from the
                                       label ("target <= X"), verdict
  ops_per_s                            throughput; the label's "vs BM_name" (or "vs BM_name:base")
                                       names the single-thread benchmark it is divided by
  anything else                        printed as it is (footprint bytes and the like)
Every figure is "median (min-max)" over the repetitions.

Exit status: 1 if a benchmark reported an error (SkipWithError), else 0. A missed timing target
is printed, not failed: the machine is shared, and figures are for reading.
"""

import json
import re
import sys

AGGREGATES = ("median", "min", "max")


def load(paths):
    """Returns {run_name: {"median"|"min"|"max": entry}} and the list of errors."""
    runs, errors, order = {}, [], []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if not text.strip():  # the program ran no benchmark (a --benchmark_filter matched none)
            continue
        data = json.loads(text)
        for b in data.get("benchmarks", []):
            name = b.get("run_name", b["name"])
            if b.get("error_occurred"):
                errors.append("%s: %s" % (name, b.get("error_message", "error")))
                continue
            slot = runs.setdefault(name, {})
            if name not in order:
                order.append(name)
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_name") in AGGREGATES:
                    slot[b["aggregate_name"]] = b
            else:  # a single run (no repetitions): it is its own median, min and max
                for a in AGGREGATES:
                    slot.setdefault(a, b)
    # Source order (family, then instance), whatever order random interleaving ran them in.
    def key(n):
        med = runs[n].get("median", {})
        return (med.get("family_index", 0), med.get("per_family_instance_index", 0), n)
    return [(n, runs[n]) for n in sorted((n for n in order if runs[n]), key=key)], errors


def pretty(name):
    name = re.sub(r"^BM_", "", name)
    name = re.sub(r"/(real_time|iterations:\d+|repeats:\d+)", "", name)
    return name


def fmt(value, unit=""):
    if value is None:
        return "-"
    a = abs(value)
    if unit == "ns":
        return "%.3g ns" % value if a < 10 else "%.1f ns" % value
    if unit == "/s":
        if a >= 1e6:
            return "%.2f M/s" % (value / 1e6)
        if a >= 1e3:
            return "%.1f k/s" % (value / 1e3)
        return "%.0f /s" % value
    if unit == "x":
        return "%.2fx" % value
    if a >= 100 or value == int(value):
        return "%.0f" % value
    return "%.3g" % value


def spread(slot, key, unit):
    med = slot["median"].get(key)
    lo = slot["min"].get(key)
    hi = slot["max"].get(key)
    if med is None:
        return "-"
    if lo is None or hi is None or lo == hi:
        return fmt(med, unit)
    return "%s (%s-%s)" % (fmt(med, unit), fmt(lo, unit).split()[0], fmt(hi, unit))


def table(headers, rows, markdown):
    if markdown:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def report(setting, runs, markdown):
    by_name = dict(runs)
    paired, throughput, other = [], [], []
    for name, slot in runs:
        med = slot["median"]
        label = med.get("label", "")
        if "ns_per_op" in med and "base_ns_per_op" in med:
            m = re.search(r"target <= ([0-9.]+)", label)
            target = float(m.group(1)) if m else None
            ratio = med.get("ratio")
            verdict = "-"
            if target is not None and ratio is not None:
                verdict = "ok" if ratio <= target else (
                    "no, by design" if "by design" in label else "MISSED")
            baseline = re.sub(r";.*", "", re.sub(r"^vs ", "", label))
            paired.append([pretty(name), spread(slot, "ns_per_op", "ns"),
                           spread(slot, "base_ns_per_op", "ns"), spread(slot, "ratio", "x"),
                           "<= %g" % target if target is not None else "-", verdict, baseline])
        elif "ops_per_s" in med:
            m = re.search(r"vs (BM_[A-Za-z0-9_/:]+?)(:base)?(\s|$)", label)
            ref_ops, ref_name = None, "-"
            if m:
                ref = by_name.get(m.group(1))
                key = "base_ns_per_op" if m.group(2) else "ns_per_op"
                if ref and ref["median"].get(key):
                    ref_ops = 1e9 / ref["median"][key]
                    ref_name = pretty(m.group(1)) + (" (its baseline)" if m.group(2) else "")
            ratio = "-"
            if ref_ops:
                lo, hi = slot["min"]["ops_per_s"] / ref_ops, slot["max"]["ops_per_s"] / ref_ops
                ratio = "%s (%.2f-%.2fx)" % (fmt(med["ops_per_s"] / ref_ops, "x"), lo, hi)
            throughput.append([pretty(name), spread(slot, "ops_per_s", "/s"), fmt(ref_ops, "/s"),
                               ratio, ref_name])
        else:
            skip = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
                    "iterations", "real_time", "cpu_time", "time_unit", "family_index",
                    "per_family_instance_index", "aggregate_name", "aggregate_unit", "label"}
            counters = ", ".join("%s=%s" % (k, spread(slot, k, ""))
                                 for k in med if k not in skip and isinstance(med[k], (int, float)))
            other.append([pretty(name), counters, label])

    out = []
    if paired:
        out.append("%s: cost per operation against a baseline measured in the same run\n" % setting)
        out.append(table(["benchmark", "holdfast", "baseline", "ratio", "target", "met", "baseline is"],
                         paired, markdown))
    if throughput:
        out.append("\n%s: two threads, completed operations per second (both threads together)\n"
                   % setting)
        out.append(table(["benchmark", "throughput", "1 thread", "ratio", "vs"], throughput,
                         markdown))
    if other:
        out.append("\n%s: other figures\n" % setting)
        out.append(table(["benchmark", "figures", "note"], other, markdown))
    return "\n".join(out)


def main(argv):
    markdown = "--markdown" in argv
    args = [a for a in argv if a != "--markdown"]
    if not args or any("=" not in a for a in args):
        sys.stderr.write(__doc__)
        return 2
    failed = False
    for arg in args:
        setting, files = arg.split("=", 1)
        runs, errors = load([f for f in files.split(",") if f])
        if runs:
            print(report(setting, runs, markdown))
            print()
        for e in errors:
            failed = True
            print("ERROR %s" % e)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
