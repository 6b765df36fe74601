"""Run presets from two source trees and compare their result files bit for bit.

Usage:
    python benchmarks/compare_runs.py run SRC OUT [--presets fig2,hybrid,...]
    python benchmarks/compare_runs.py diff OLD_OUT NEW_OUT

``run`` runs each preset with ``PYTHONPATH=SRC`` (a fresh interpreter per preset, so two
trees never share imported modules) into ``OUT/<preset>``; the default list is the one the
structure issue names (fig2, hybrid, fig7, digits-mlp --quick, graphlearn-heterogeneity
--quick, frontier --quick). ``diff`` compares every ``summary.json`` and ``curves.csv``
(and ``frontier.csv``) under the two folders: JSON values exactly (``elapsed_s`` ignored),
CSV cells as text, and prints each difference with its path; exit 1 if any.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

DEFAULT = "fig2,hybrid,fig7,digits-mlp:quick,graphlearn-heterogeneity:quick,frontier:quick"
IGNORED = {"elapsed_s"}


def run(src: str, out: Path, presets: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    for item in presets.split(","):
        name, _, quick = item.partition(":")
        cmd = [sys.executable, "-c", "from pgfl.cli import main; main()", "reproduce", name]
        cmd += ["--out", str(out / name)] + (["--quick"] if quick else [])
        print(" ".join(cmd[3:]), flush=True)
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)


def _json_diff(a, b, where: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in IGNORED:
                continue
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'new' if k in b else 'old'}")
            else:
                _json_diff(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _json_diff(x, y, f"{where}[{i}]", out)
    elif a != b:
        out.append(f"{where}: {a!r} -> {b!r}")


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def diff(old: Path, new: Path) -> int:
    found: list[str] = []
    names = ("summary.json", "curves.csv", "frontier.csv")
    files = sorted({p.relative_to(old) for n in names for p in old.rglob(n)})
    for rel in files:
        a, b = old / rel, new / rel
        if not b.exists():
            found.append(f"{rel}: missing in new")
            continue
        if rel.suffix == ".json":
            _json_diff(json.loads(a.read_text()), json.loads(b.read_text()), str(rel), found)
        else:
            ra, rb = _csv_rows(a), _csv_rows(b)
            if len(ra) != len(rb) or (ra and ra[0].keys() != rb[0].keys()):
                found.append(f"{rel}: {len(ra)} rows/{list(ra[0])} -> {len(rb)}/{list(rb[0])}")
                continue
            bad = [i for i, (x, y) in enumerate(zip(ra, rb, strict=True)) if x != y]
            if bad:
                found.append(f"{rel}: {len(bad)} rows differ, first {bad[0]}")
    for line in found:
        print(line)
    print(f"{len(files)} files compared, {len(found)} differences")
    return 1 if found else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("src")
    r.add_argument("out", type=Path)
    r.add_argument("--presets", default=DEFAULT)
    d = sub.add_parser("diff")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    args = parser.parse_args()
    if args.cmd == "run":
        run(args.src, args.out, args.presets)
    else:
        sys.exit(diff(args.old, args.new))


if __name__ == "__main__":
    main()
