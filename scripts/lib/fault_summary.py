"""Sums up fault runs for docs/reliability.md: per run, the checker's verdict; per kind of
fault over every run, what the clients saw in its windows (requests, errors by kind, the
worst window's p99 and how long it lasted).

    python3 scripts/lib/fault_summary.py OUT_DIR [OUT_DIR ...]

Each OUT_DIR is what scripts/fault-run.sh left (report.json). Prints Markdown tables.
"""

import json
import sys
from collections import defaultdict


def load(directory):
    with open(f"{directory}/report.json") as f:
        return json.load(f)


def errors_text(errors):
    if not errors:
        return "–"
    return ", ".join(f"{kind} {n}" for kind, n in sorted(errors.items(), key=lambda e: -e[1]))


def main(dirs):
    runs = [(d, load(d)) for d in dirs]
    print("| seed | requests | ok | writes acknowledged / refused / unknown | unknown resolved | lost | phantom | misplaced |")
    print("|---|---|---|---|---|---|---|---|")
    for _, r in runs:
        writes = r.get("writes", {})
        resolved = defaultdict(int)
        for u in r.get("unknown_writes", []):
            resolved[u["resolved"].replace("_", " ")] += 1
        resolved = ", ".join(f"{n} {how}" for how, n in sorted(resolved.items())) or "–"
        print(
            f"| {r['config']['seed']} | {r['total']['requests']} | {r['total']['ok']} | "
            f"{writes.get('acked', 0)} / {writes.get('refused', 0)} / {writes.get('unknown', 0)} | "
            f"{resolved} | {r['lost']} | {r['phantom']} | {r['misplaced']} |"
        )
    kinds = defaultdict(lambda: {"windows": 0, "seconds": 0.0, "requests": 0, "ok": 0,
                                 "errors": defaultdict(int), "p99": 0.0})
    for _, r in runs:
        for w in r["faults"]["windows"] + [r["faults"]["outside"]]:
            k = kinds[w["fault"]]
            k["windows"] += 1
            k["seconds"] += max(0.0, w["end_s"] - w["start_s"])
            k["requests"] += w["requests"]
            k["ok"] += w["ok"]
            for kind, n in w["errors"].items():
                k["errors"][kind] += n
            k["p99"] = max(k["p99"], w["p99_ms"] or 0.0)
    print()
    print("| fault | windows | seconds in all | requests | failed | errors by kind | worst window's p99 ms |")
    print("|---|---|---|---|---|---|---|")
    order = ["kill-web", "kill-worker", "kill-move", "pause-shard", "restart-shard",
             "stop-replica", "restart-control", "roll", "move", "outside every fault"]
    for name in sorted(kinds, key=lambda n: order.index(n) if n in order else len(order)):
        k = kinds[name]
        print(
            f"| {name} | {k['windows']} | {k['seconds']:.0f} | {k['requests']} | "
            f"{k['requests'] - k['ok']} | {errors_text(k['errors'])} | {k['p99']:.0f} |"
        )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
