#!/usr/bin/env python3
"""Instructions and barriers per kernel in the SASS of a CUDA binary (docs/devlog.md, the 2026-11-24 fast-path and superbin entries).

Usage: cuobjdump -sass BINARY > FILE.sass; python3 tools/gpu/sass-counts.py FILE.sass [NAME_REGEX]
(tools/gpu/toga-gpu sass runs it on carried binaries, on the device machine.)
Prints, for every function whose name matches NAME_REGEX (default: toga|ualloc|allocator|bump),
its SASS instruction count and how many MEMBAR, FENCE, ATOM(G), RED(G), CALL, STL and LDL
instructions it has, and the STL before its first EXIT (a kernel parameter copied to local memory
at kernel entry: docs/design.md §8.8). Instructions are counted by their /*offset*/ markers, which have 4 hex digits below 64 KiB of
code and more above. Python only.
"""
import re
import sys


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print("usage: sass-counts.py FILE.sass [NAME_REGEX]  (FILE.sass from cuobjdump -sass BINARY)", file=sys.stderr)
        return 2
    try:
        txt = open(sys.argv[1], encoding="utf-8", errors="replace").read()
        pick = re.compile(sys.argv[2] if len(sys.argv) == 3 else r"toga|ualloc|allocator|bump")
    except OSError as e:
        print(f"sass-counts.py: cannot read '{sys.argv[1]}': {e}", file=sys.stderr)
        return 1
    except re.error as e:
        print(f"sass-counts.py: bad NAME_REGEX '{sys.argv[2]}': {e}", file=sys.stderr)
        return 2
    functions = re.split(r"\n\s+Function : ", "\n" + txt)[1:]
    if not functions:
        print(f"sass-counts.py: no 'Function :' sections in '{sys.argv[1]}' (is it cuobjdump -sass output?)", file=sys.stderr)
        return 1
    for f in functions:
        name = f.split("\n", 1)[0]
        if not pick.search(name):
            continue
        def c(pat: str) -> int:
            return len(re.findall(pat, f))
        instr, membar, fence = c(r"/[*][0-9a-f]{4,}[*]/ "), c(r"MEMBAR"), c(r"FENCE")
        atom, red, call = c(r"ATOMG?[.]"), c(r"\bREDG?[.]"), c(r"\bCALL\b")
        stl, ldl = c(r"\bSTL\b"), c(r"\bLDL\b")
        entry_stl = len(re.findall(r"\bSTL\b", f[: f.find("EXIT")])) if "EXIT" in f else stl
        print(f"{name[:150]}\n    instr {instr:6d}  MEMBAR {membar:3d}  FENCE {fence:3d}  ATOM {atom:4d}  RED {red:3d}  CALL {call:3d}"
              f"  STL {stl:4d}  LDL {ldl:4d}  STL before the first EXIT {entry_stl:2d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
