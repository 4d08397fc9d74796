"""Shared by toga-plot.py and toga-table.py: reading toga-bench JSON files and naming sizes."""
import json
import sys


def load_doc(path, tool):
    """The parsed toga-bench/1 document at `path`; exits with a message naming `tool` otherwise."""
    with open(path) as f:
        doc = json.load(f)
    if doc.get("schema") != "toga-bench/1":
        sys.exit(f"{tool}: {path}: not a toga-bench/1 JSON file (schema={doc.get('schema')!r})")
    return doc


def fmt_bytes(b):
    """Bytes as "16 B", "4 KiB", "8 GiB" (the largest unit that divides them); "-" for 0 / None."""
    if not b:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or b % 1024:
            return f"{b} {unit}"
        b //= 1024
    return f"{b} TiB"
