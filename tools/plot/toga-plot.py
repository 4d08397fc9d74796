#!/usr/bin/env python3
"""toga-plot: turns toga-bench JSON files (schema toga-bench/1 or /2) into PNG charts.

    python3 tools/plot/toga-plot.py RESULT.json [MORE.json ...] --out docs/img [--prefix h100-]

Charts (one PNG each, written only when the input holds the case):
  throughput.png   T1 allocations/s vs size, alloc and free, one line per allocator (log-log; with
                   several thread counts, each allocator's largest)
  t1-threads.png   toga's T1 time as a multiple of bump-warp's vs thread count, alloc and free, one
                   line per size (only when the input has T1 at two or more thread counts with
                   bump-warp beside it)
  scaling.png      T4 kernel time vs thread count, one panel per size
  churn.png        T5 malloc+free pairs/s per size, bars per allocator
  utilisation.png  T8 bytes obtained / heap bytes per size, bars per allocator
  graph.png        T11 ms per insertion and deletion round, one panel per graph
Rows of several files are drawn together; the allocator label gets the file's GPU name when the
files come from different GPUs; simulator files are titled "simulator (host time, trends only)".
The floor reference is bump-warp (bump-warp-sim), drawn dashed; the per-thread bump is drawn
dotted. The main job (tools/run-main.sh) runs it on its JSON when matplotlib is present. Needs matplotlib: it is not installed by the test command
(`bash tools/setup-debian.sh --plot` or `apt-get install python3-matplotlib`); without it the
tool says so and exits with status 1. Exit status 2: usage; 1: a file that cannot be read.
"""
import argparse
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError:
    sys.exit("toga-plot: needs matplotlib, which is not installed. On Debian: bash tools/setup-debian.sh --plot "
             "(or apt-get install python3-matplotlib); elsewhere: pip install matplotlib. "
             "tools/plot/toga-table.py needs no matplotlib.")

from toga_results import fmt_bytes, load_doc  # noqa: E402

COLOURS = {"toga": "#1f77b4", "cuda-malloc": "#d62728", "bump-warp": "#2ca02c", "bump": "#7f7f7f",
           "toga-sim": "#1f77b4", "bump-warp-sim": "#2ca02c", "bump-sim": "#7f7f7f"}
STYLES = {"bump-warp": "--", "bump-warp-sim": "--", "bump": ":", "bump-sim": ":"}


def load(paths):
    rows = []
    gpus = set()
    for p in paths:
        doc = load_doc(p, "toga-plot")
        gpu = doc.get("environment", {}).get("gpu", {}).get("gpu") or "simulator (host time, trends only)"
        gpus.add(gpu)
        for r in doc["rows"]:
            r["_gpu"] = gpu
            rows.append(r)
    tag = len(gpus) > 1
    for r in rows:
        r["_label"] = f"{r['allocator']} ({r['_gpu']})" if tag else r["allocator"]
    return rows, sorted(gpus)


def save(fig, out, name, title=None):
    """Writes the figure to `out` + `name` (out: folder and file-name prefix); returns the path."""
    if title is not None:
        fig.suptitle(title)
    fig.tight_layout()
    path = out + name
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def colour(label):
    return COLOURS.get(label.split(" ")[0])


def style(label):
    return STYLES.get(label.split(" ")[0], "-")


def log_axes(ax, xlabel, title_text):
    """Log-log axes (x in base 2) with a label, a title and a light grid: the line charts' frame."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_title(title_text)
    ax.grid(True, which="both", alpha=0.3)


def plot_throughput(rows, out, title):
    t1 = [r for r in rows if r["case"] == "T1" and r["ops_per_s"]]
    if not t1:
        return None
    # a sweep over thread counts: each (allocator, size, op) at its largest count only
    top = {}
    for r in t1:
        k = (r["_label"], r["size"], r["op"])
        top[k] = max(top.get(k, 0), r["threads"])
    t1 = [r for r in t1 if r["threads"] == top[(r["_label"], r["size"], r["op"])]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, op in zip(axes, ("alloc", "free")):
        for label in sorted({r["_label"] for r in t1}):
            pts = sorted((r["size"], r["ops_per_s"]) for r in t1 if r["_label"] == label and r["op"] == op)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style(label), marker="o", ms=3, label=label, color=colour(label))
        log_axes(ax, "allocation size (bytes)", f"T1 {op}")
    axes[0].set_ylabel("operations / s")
    axes[0].legend()
    return save(fig, out, "throughput.png", title)


def plot_t1_threads(rows, out, title):
    """T1 median time over bump-warp's (same size, op, thread count and GPU) against threads."""
    t1 = [r for r in rows if r["case"] == "T1" and r["op"] in ("alloc", "free") and r["median_ms"]]
    if len({r["threads"] for r in t1}) < 2:
        return None
    floor = {(r["_gpu"], r["size"], r["op"], r["threads"]): r["median_ms"] for r in t1
             if r["allocator"] in ("bump-warp", "bump-warp-sim")}
    # toga only: the peers' ratios (cuda-malloc: 10^2-10^4) would squeeze toga's 1-10x into the bottom
    others = [r for r in t1 if r["allocator"] in ("toga", "toga-sim")]
    if not floor or not others:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    cmap = plt.get_cmap("viridis")
    sizes = sorted({r["size"] for r in others})
    for ax, op in zip(axes, ("alloc", "free")):
        for label in sorted({r["_label"] for r in others}):
            for i, s in enumerate(sizes):
                pts = sorted((r["threads"], r["median_ms"] / floor[k]) for r in others
                             if r["_label"] == label and r["op"] == op and r["size"] == s
                             and (k := (r["_gpu"], s, op, r["threads"])) in floor)
                if pts:
                    name = fmt_bytes(s) if len({r["_label"] for r in others}) == 1 else f"{label} {fmt_bytes(s)}"
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style(label), marker="o", ms=3, label=name,
                            color=cmap(i / max(1, len(sizes) - 1)))
        ax.axhline(2.0, color="#888888", lw=0.8, ls=":")
        log_axes(ax, "threads", f"T1 {op}, x bump-warp (dotted: 2x)")
    axes[0].set_ylabel("median kernel time / bump-warp's")
    axes[0].legend(fontsize=8)
    return save(fig, out, "t1-threads.png", title)


def plot_scaling(rows, out, title):
    t4 = [r for r in rows if r["case"] == "T4" and r["op"] == "alloc" and r["median_ms"] is not None]
    if not t4:
        return None
    sizes = sorted({r["size"] for r in t4})
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 4), squeeze=False)
    for ax, s in zip(axes[0], sizes):
        for label in sorted({r["_label"] for r in t4}):
            pts = sorted((r["threads"], r["median_ms"]) for r in t4 if r["_label"] == label and r["size"] == s)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style(label), marker="o", ms=3, label=label, color=colour(label))
        log_axes(ax, "threads", f"T4 alloc, {fmt_bytes(s)}")
    axes[0][0].set_ylabel("kernel ms (median)")
    axes[0][0].legend()
    return save(fig, out, "scaling.png", title)


def bars(rows, value, ylabel, name, case_title, out, title, log=False):
    if not rows:
        return None
    sizes = sorted({r["size"] for r in rows})
    labels = sorted({r["_label"] for r in rows})
    width = 0.8 / len(labels)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, label in enumerate(labels):
        xs, ys = [], []
        for j, s in enumerate(sizes):
            v = [value(r) for r in rows if r["_label"] == label and r["size"] == s and value(r) is not None]
            if v:
                xs.append(j + i * width)
                ys.append(v[0])
        ax.bar(xs, ys, width, label=label, color=colour(label))
    ax.set_xticks([j + width * (len(labels) - 1) / 2 for j in range(len(sizes))])
    ax.set_xticklabels([fmt_bytes(s) for s in sizes])
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{case_title} - {title}")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend()
    return save(fig, out, name)


def plot_graph(rows, out, title):
    t11 = [r for r in rows if r["case"] == "T11" and r["ms"]]
    if not t11:
        return None
    graphs = sorted({r["param"] for r in t11})
    fig, axes = plt.subplots(1, len(graphs), figsize=(4.2 * len(graphs), 4), squeeze=False)
    for ax, g in zip(axes[0], graphs):
        for label in sorted({r["_label"] for r in t11}):
            for op, style in (("insert", "-"), ("delete", "--")):
                rs = [r for r in t11 if r["_label"] == label and r["param"] == g and r["op"] == op]
                if rs:
                    ax.plot(range(1, len(rs[0]["ms"]) + 1), rs[0]["ms"], style, label=f"{label} {op}", color=colour(label))
        ax.set_yscale("log")
        ax.set_xlabel("round" if not any(r["allocator"].endswith("-sim") for r in t11) else "repetition (simulator)")
        ax.set_title(f"T11 {g}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("ms per round")
    axes[0][0].legend(fontsize=7)
    return save(fig, out, "graph.png", title)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", nargs="+", help="toga-bench --json output files")
    ap.add_argument("--out", default=".", help="folder for the PNG files")
    ap.add_argument("--prefix", default="", help="prefix of the PNG file names, e.g. h200-")
    a = ap.parse_args()
    rows, gpus = load(a.json)
    os.makedirs(a.out, exist_ok=True)
    title = ", ".join(gpus)
    out = os.path.join(a.out, a.prefix)  # every chart is out + its name
    made = [
        plot_throughput(rows, out, title),
        plot_t1_threads(rows, out, title),
        plot_scaling(rows, out, title),
        bars([r for r in rows if r["case"] == "T5" and r["ops_per_s"]], lambda r: r["ops_per_s"], "pairs / s",
             "churn.png", "T5 churn (malloc + write + free)", out, title, log=True),
        bars([r for r in rows if r["case"] == "T8" and "utilisation" in r["metrics"]],
             lambda r: 100 * r["metrics"]["utilisation"], "% of the heap obtained", "utilisation.png",
             "T8 out-of-memory utilisation", out, title),
        plot_graph(rows, out, title),
    ]
    for p in made:
        if p:
            print(p)


if __name__ == "__main__":
    main()
