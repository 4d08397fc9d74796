#!/usr/bin/env python3
"""Markdown kill table from `toga-sim mutants --shrink --json FILE` (docs/simulator.md section 16.1).

Usage: python3 tools/plot/mutants-table.py FILE.json
Prints one row per mutant: id, class, GPU-specific, scenario and parameters, memory model and
fault sites, strategy, declared depth, schedule of the first failure, verdict, preemptions of the
shrunk failure and the replay command. Python only (no third-party modules).
"""
import json
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: mutants-table.py FILE.json (written by toga-sim mutants --shrink --json FILE)", file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            d = json.load(f)
        rows = d["mutants"]
    except (OSError, ValueError, KeyError) as e:
        print(f"mutants-table.py: cannot read a mutants JSON from '{sys.argv[1]}': {e}", file=sys.stderr)
        return 1
    print("| mutant | class | GPU | scenario | memory, faults | strategy | depth | first failure at schedule "
          "| verdict | shrunk to (preemptions) | replay |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for m in rows:
        scen = m["scenario"] + (" " + m["params"] if m.get("params") else "")
        mem = m["memory"] + ("" if m.get("faults", "none") == "none" else " faults " + m["faults"])
        depth = "" if m.get("depth") is None else str(m["depth"])
        if m.get("killed"):
            first, verdict = str(m["schedules"]), m["verdict"]
            shrunk = "" if m.get("shrunk_preemptions") is None else str(m["shrunk_preemptions"])
            replay = "`" + m["replay"] + "`"
        else:
            first = "survived " + str(d.get("schedules", "")) + (" (equivalent)" if m.get("equivalent") else "")
            verdict, shrunk, replay = "survived", "", ""
        print(f"| {m['id']} | {m['class']} | {'yes' if m.get('gpu_specific') else ''} | {scen} | {mem} | "
              f"{m['strategy']} | {depth} | {first} | {verdict} | {shrunk} | {replay} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
