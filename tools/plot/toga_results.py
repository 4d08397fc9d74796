"""Shared by toga-plot.py and toga-table.py: reading toga-bench JSON files and naming sizes."""
import json
import sys

SCHEMAS = ("toga-bench/1", "toga-bench/2")


def load_doc(path, tool):
    """The parsed toga-bench JSON document at `path` (schema toga-bench/1 or /2); exits with status 1
    and a message naming `tool` and the file otherwise (missing, unreadable, not JSON, other schema)."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        sys.exit(f"{tool}: cannot read {path}: {e.strerror}")
    except ValueError as e:
        sys.exit(f"{tool}: {path} is not JSON ({e}); give a file written by toga-bench run --json")
    if not isinstance(doc, dict) or doc.get("schema") not in SCHEMAS:
        schema = doc.get("schema") if isinstance(doc, dict) else None
        sys.exit(f"{tool}: {path}: not a toga-bench JSON file (schema={schema!r}; want one of {', '.join(SCHEMAS)})")
    if not isinstance(doc.get("rows"), list):
        sys.exit(f"{tool}: {path}: no \"rows\" list; the file is truncated or was not written by toga-bench")
    return doc


def floor_reference(doc, sim):
    """The allocator every "x bump" ratio of `doc` refers to: the warp-aggregated bump-warp
    (bump-warp-sim in the simulator) from schema toga-bench/2 on, the per-thread bump before."""
    refs = doc.get("references", {})
    if sim:
        return refs.get("floor_sim", "bump-sim")
    return refs.get("floor", "bump")


def fmt_bytes(b):
    """Bytes as "16 B", "4 KiB", "8 GiB" (the largest unit that divides them); "-" for 0 / None."""
    if not b:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or b % 1024:
            return f"{b} {unit}"
        b //= 1024
    return f"{b} TiB"
