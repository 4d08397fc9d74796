#!/usr/bin/env python3
"""toga-table: turns one toga-bench JSON file (schema toga-bench/1 or /2) into Markdown tables, one per
case, with toga's figures beside its references from the same run (used for docs/benchmarks.md).

    python3 tools/plot/toga-table.py RESULT.json [--cases T1,T5] > tables.md

Per case point (case, op, size, param): toga's median ms (threads it ran), M ops/s, the ratio of
its throughput to cuda-malloc's and to the floor's (bump-warp, the warp-aggregated bump; in files
of schema toga-bench/1, the per-thread bump), the references' M ops/s (threads), toga's
failures / corrupt blocks, and toga's case figures (utilisation, range_ratio, registers, ...).
Simulator files (toga-sim) are tabulated the same way against bump-warp-sim. Needs only Python 3,
which a fresh Debian does not have: `apt-get install python3` (or bash tools/setup-debian.sh --plot).
toga-bench's own summary (the end of `toga-bench run`) needs no Python.
"""
import argparse

from toga_results import floor_reference, fmt_bytes, load_doc


def fmt(v, digits=3):
    if v is None:
        return "-"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.01:
        return f"{v:.3f}"
    return f"{v:.1e}"


def mops(r):
    return None if r["ops_per_s"] is None else r["ops_per_s"] / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json")
    ap.add_argument("--cases", default="", help="comma list of case ids (default: all)")
    a = ap.parse_args()
    doc = load_doc(a.json, "toga-table")
    rows = doc["rows"]
    sim = any(r["allocator"] == "toga-sim" for r in rows)
    me, ref_m = ("toga-sim", None) if sim else ("toga", "cuda-malloc")
    ref_b = floor_reference(doc, sim)
    want = {c for c in a.cases.split(",") if c} if a.cases else None
    if a.cases and not want:
        ap.error(f"--cases {a.cases!r} names no case (give ids such as T1,T5)")
    key = lambda r: (r["case"], r["op"], r["size"], r["param"])
    refs = {(r["allocator"], key(r)): r for r in rows}
    cases = []
    for r in rows:
        if r["case"] not in cases:
            cases.append(r["case"])
    for c in cases:
        if want and c not in want:
            continue
        mine = [r for r in rows if r["case"] == c and r["allocator"] == me]
        if not mine:
            continue
        print(f"\n**{c}**\n")
        head = ["op", "size", "param", f"{me} ms (threads)", f"{me} M ops/s"]
        if ref_m:
            head += ["x cuda-malloc", "cuda-malloc M ops/s (threads)"]
        head += [f"x {ref_b}", f"{ref_b} M ops/s", "fail / corrupt", "figures"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in mine:
            cells = [r["op"], fmt_bytes(r["size"]), r["param"] or "-",
                     (fmt(r["median_ms"]) + f" ({r['threads']:,})") if r["median_ms"] is not None else "-",
                     fmt(mops(r))]
            if ref_m:
                m = refs.get((ref_m, key(r)))
                cells += [fmt(r["ratio_cuda_malloc"]) + ("x" if r["ratio_cuda_malloc"] is not None else ""),
                          (fmt(mops(m)) + f" ({m['threads']:,})") if m and mops(m) is not None else (m["note"][:60] if m else "-")]
            b = refs.get((ref_b, key(r)))
            cells += [fmt(r["ratio_bump"]) + ("x" if r["ratio_bump"] is not None else ""),
                      fmt(mops(b)) if b else "-", f"{r['failures']} / {r['corrupt']}"]
            figs = " ".join(f"{k}={fmt(v)}" for k, v in sorted(r["metrics"].items()))
            if r["note"]:
                figs = (figs + "; " if figs else "") + r["note"]
            cells.append(figs or "")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
