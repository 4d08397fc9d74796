#!/usr/bin/env python3
"""Tables from toga-bench JSON files (schema toga-bench/1 or /2), for tools/gpu/toga-gpu. Stdlib only.

  bench-table.py summary FILE.json [...] [--allocator toga] [--max-rows N]
      The headline rows of each file: median ms, ops/s and the ratios to the floor (bump-warp)
      and to cudaMalloc as toga-bench computed them (ratio = this allocator's ops/s over the
      reference's), failures and corrupt blocks, the file's errors. T13-style rows (no timing)
      show their metrics (registers, local bytes).

  bench-table.py ab --base A.json [...] --test B.json [...]
  bench-table.py ab --manifest FILE
      A/B of two builds: rows are matched by (case, op, allocator, size, threads, param); each
      side's figure is the median over its files (rounds) of the row's median_ms ("median of
      medians"); ratio = test / base (below 1: the test build is faster). Spread: (max - min) /
      median of one side's per-round medians. Rows whose thread count differs between the sides
      (toga-bench cut a slow allocator) are matched without it and marked. A manifest has one
      line per file: LABEL<TAB>base|test<TAB>PATH; rows are compared within a label (one
      toga-bench invocation) only.

Exit status: 0; 1: a file that cannot be read or holds no rows; 2: usage.
"""
import json
import math
import os
import signal
import statistics
import sys

KEY_FIELDS = ("case", "op", "allocator", "size", "threads", "param")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"bench-table.py: cannot read '{path}': {e}") from None
    if not isinstance(d, dict) or not isinstance(d.get("rows"), list):
        print(f"bench-table.py: '{path}' is not a toga-bench JSON file (no 'rows' list)", file=sys.stderr)
        sys.exit(1)
    return d


def fmt_size(n):
    try:
        n = int(n)
    except (TypeError, ValueError):
        return str(n)
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def fmt_ms(x):
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.3f}"
    return f"{x:.4f}"


def fmt_ratio(x):
    if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))):
        return "-"
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}"


def fmt_metrics(m):
    if not m:
        return ""
    return " ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in sorted(m.items()))


def table(header, rows, right=()):
    """Columns padded to their widest cell; the columns whose index is in `right` right-aligned."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    out = []
    for r in [header] + rows:
        out.append("  ".join(str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    return "\n".join(out)


def summary(args):
    files, allocator, max_rows = [], "toga", 60
    it = iter(args)
    for a in it:
        if a == "--allocator":
            allocator = next(it, None)
        elif a == "--max-rows":
            try:
                max_rows = int(next(it, ""))
            except ValueError:
                return usage("--max-rows needs a number")
        elif a.startswith("--"):
            return usage(f"unknown option '{a}'")
        else:
            files.append(a)
    if not files or allocator is None:
        return usage("summary needs FILE.json (and --allocator NAME)")
    status = 0
    for path in files:
        d = load(path)
        rows = d["rows"]
        gpu = (d.get("environment") or {}).get("gpu") or {}
        bad = sum(int(r.get("failures") or 0) + int(r.get("corrupt") or 0) for r in rows)
        print(f"{os.path.basename(path)}: {len(rows)} rows, commit {d.get('commit', '?')}, {gpu.get('gpu', '?')}, profile {d.get('profile', '?')}, "
              f"reps {d.get('reps', '?')}, {d.get('seconds', 0) or 0:.0f} s; failures+corrupt {bad}")
        for e in d.get("errors") or []:
            print(f"  error: {e}")
            status = 1
        if not rows:
            print("  (no rows)")
            status = 1
            continue
        pick = [r for r in rows if allocator in ("", "all") or r.get("allocator") == allocator]
        body = []
        for r in pick[:max_rows]:
            flag = "!" if (r.get("failures") or r.get("corrupt")) else ""
            if r.get("median_ms") is None:
                body.append([r.get("case"), r.get("op"), r.get("allocator"), r.get("param") or "", fmt_size(r.get("size")),
                             fmt_size(r.get("threads")), "-", "-", "-", "-", flag + fmt_metrics(r.get("metrics"))])
                continue
            ops = r.get("ops_per_s")
            body.append([r.get("case"), r.get("op"), r.get("allocator"), r.get("param") or "", fmt_size(r.get("size")),
                         fmt_size(r.get("threads")), fmt_ms(r.get("median_ms")), f"{ops:.3g}" if ops else "-",
                         fmt_ratio(r.get("ratio_bump")), fmt_ratio(r.get("ratio_cuda_malloc")),
                         flag + (f"fail {r.get('failures')} corrupt {r.get('corrupt')} " if flag else "") + (r.get("note") or "")])
        if body:
            print(table(["case", "op", "alloc", "param", "size", "threads", "median ms", "ops/s", "x floor", "x cudaMalloc", "note"], body,
                        right=range(4, 10)))
        if len(pick) > max_rows:
            print(f"  ... {len(pick) - max_rows} more {allocator} rows in the file")
    return status


def key_of(r):
    return tuple(r.get(k) for k in KEY_FIELDS)


def ab(args):
    base, test, manifest, side = [], [], None, None
    it = iter(args)
    for a in it:
        if a == "--base":
            side = base
        elif a == "--test":
            side = test
        elif a == "--manifest":
            manifest = next(it, None)
            if manifest is None:
                return usage("--manifest needs a file")
        elif a.startswith("--"):
            return usage(f"unknown option '{a}'")
        elif side is None:
            return usage(f"'{a}': name --base or --test before the files")
        else:
            side.append(a)
    groups = {}  # label -> {"base": [paths], "test": [paths]}
    if manifest:
        try:
            lines = open(manifest, encoding="utf-8").read().splitlines()
        except OSError as e:
            print(f"bench-table.py: cannot read '{manifest}': {e}", file=sys.stderr)
            return 1
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 3 or parts[1] not in ("base", "test"):
                print(f"bench-table.py: {manifest}:{n}: want LABEL<TAB>base|test<TAB>PATH", file=sys.stderr)
                return 2
            groups.setdefault(parts[0], {"base": [], "test": []})[parts[1]].append(parts[2])
    else:
        if not base or not test:
            return usage("ab needs --base FILE... and --test FILE... (or --manifest FILE)")
        groups[""] = {"base": base, "test": test}
    out, metrics_out, missing, ratios = [], [], [], {}
    status = 0
    for label, g in groups.items():
        sides = {}
        for s in ("base", "test"):
            per_key = {}
            for path in g[s]:
                if path.startswith("!"):  # a run that failed: recorded by toga-gpu, no file
                    missing.append(f"{label or '-'} {s}: {path[1:]}")
                    continue
                d = load(path)
                for r in d["rows"]:
                    per_key.setdefault(key_of(r), []).append(r)
            sides[s] = per_key
        b, t = sides["base"], sides["test"]
        pairs = [(k, k, "") for k in b if k in t]
        only_b = [k for k in b if k not in t]
        only_t = [k for k in t if k not in b]
        # the same row with another thread count (a slow allocator cut differently): match without threads
        def loose(k):
            return k[:4] + k[5:]
        lt = {}
        for k in only_t:
            lt.setdefault(loose(k), []).append(k)
        for kb in list(only_b):
            cand = lt.get(loose(kb), [])
            if len(cand) == 1:
                kt = cand[0]
                pairs.append((kb, kt, f"threads {kb[4]} vs {kt[4]}"))
                only_b.remove(kb)
                only_t.remove(kt)
                lt[loose(kb)] = []
        for kb, kt, note in pairs:
            rb, rt = b[kb], t[kt]
            mb = [r["median_ms"] for r in rb if r.get("median_ms") is not None]
            mt = [r["median_ms"] for r in rt if r.get("median_ms") is not None]
            bad = sum(int(r.get("failures") or 0) + int(r.get("corrupt") or 0) for r in rb + rt)
            if bad:
                note = (note + "; " if note else "") + f"failures+corrupt {bad}"
            case, op, alloc, size, threads, param = kb
            if not mb or not mt:
                fb, ft = fmt_metrics(rb[0].get("metrics")), fmt_metrics(rt[0].get("metrics"))
                if fb or ft:
                    metrics_out.append([label, case, op, alloc, param or "", fmt_size(size), fb or "-", ft or "-",
                                        "same" if fb == ft else "DIFFERENT"])
                continue
            med_b, med_t = statistics.median(mb), statistics.median(mt)
            ratio = med_t / med_b if med_b > 0 else float("nan")
            ratios.setdefault(alloc, []).append(ratio)
            def spread(v):
                m = statistics.median(v)
                return f"{100 * (max(v) - min(v)) / m:.0f}%" if len(v) > 1 and m > 0 else "-"
            out.append([label, case, op, alloc, param or "", fmt_size(size), fmt_size(threads), fmt_ms(med_b), spread(mb),
                        fmt_ms(med_t), spread(mt), f"{ratio:.3f}", f"{len(mb)}/{len(mt)}", note])
        for k in only_b:
            missing.append(f"{label or '-'} only in base: {' '.join(str(x) for x in k)}")
        for k in only_t:
            missing.append(f"{label or '-'} only in test: {' '.join(str(x) for x in k)}")
    if not out and not metrics_out:
        print("bench-table.py: no row is in both sides", file=sys.stderr)
        status = 1
    if groups.keys() == {""}:  # one unnamed group: no set column
        out = [r[1:] for r in out]
        metrics_out = [r[1:] for r in metrics_out]
        shift = 1
    else:
        shift = 0
    heads = ["set", "case", "op", "alloc", "param", "size", "threads", "base ms", "spread", "test ms", "spread", "test/base",
             "rounds", "note"][shift:]
    if out:
        print("A/B: median over rounds of each row's median ms; ratio = test / base (< 1: test faster); spread = (max-min)/median of the rounds")
        print(table(heads, out, right=range(5 - shift, 13 - shift)))
        print("geometric mean of test/base per allocator: " + ", ".join(
            f"{a} {math.exp(sum(math.log(x) for x in v if x > 0) / max(1, len([x for x in v if x > 0]))):.3f} ({len(v)} rows)"
            for a, v in sorted(ratios.items())))
    if metrics_out:
        print("\nrows without timings (metrics, e.g. T13 registers):")
        print(table(["set", "case", "op", "alloc", "param", "size", "base", "test", ""][shift:], metrics_out, right=(5 - shift,)))
    if missing:
        print("\nnot compared:")
        for m in missing:
            print("  " + m)
    return status


def usage(msg=None):
    if msg:
        print(f"bench-table.py: {msg}", file=sys.stderr)
    print("usage: bench-table.py summary FILE.json... [--allocator NAME|all] [--max-rows N]\n"
          "       bench-table.py ab --base A.json... --test B.json...  |  ab --manifest FILE", file=sys.stderr)
    return 2


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help", "help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "summary":
        return summary(rest)
    if cmd == "ab":
        return ab(rest)
    return usage(f"unknown command '{cmd}'")


if __name__ == "__main__":
    sys.exit(main())
