"""The digits-mlp preset with the built-in JAX MLP and with the same MLP in PyTorch.

Usage:
    python benchmarks/bench_torch_jax.py [--quick] [--seed 0] [--json]

Runs ``pgfl reproduce digits-mlp`` (every curve, the preset's length or ``--quick``) and the
same configuration with ``model.source`` the PyTorch MLP of docs/models.md
(``torch_model.py:make_like_builtin``: the built-in MLP's initial weights and parameter
order), each in a fresh interpreter, and reports per curve the test accuracy and log-loss
of both, the largest differences, and each run's CPU time (user + system of the child).
Needs pgfl[jax] and pgfl[torch].
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def docs_file(name: str) -> str:
    text = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    return re.search(rf"<!-- file: {re.escape(name)} -->\n```\w+\n(.*?)```", text, re.S).group(1)


def toml_text(raw: dict) -> str:
    def value(v):
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return repr(v)

    lines = [f"{k} = {value(v)}" for k, v in raw.items() if k != "curves" and not (
        isinstance(v, dict) and k != "quick")]  # fmt: skip
    for table, body in raw.items():
        if isinstance(body, dict) and table != "quick":
            lines += [f"[{table}]", *(f"{k} = {value(v)}" for k, v in body.items())]
    for curve in raw.get("curves", []):
        lines += ["[[curves]]", *(f"{k} = {value(v)}" for k, v in curve.items())]
    return "\n".join(lines) + "\n"


def run(args: list[str], cwd: Path) -> tuple[dict, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-c", "from pgfl.cli import main; main()", *args, "--json"],
        cwd=cwd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    from pgfl.experiments.presets import preset_text

    raw = tomllib.loads(preset_text("digits-mlp"))
    raw["model"] = {"kind": "custom", "source": "torch_model.py:make_like_builtin"}
    raw["name"] = "digits-torch"
    quick = ["--quick"] if a.quick else []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "torch_model.py").write_text(docs_file("torch_model.py"), encoding="utf-8")
        (folder / "digits-torch.toml").write_text(toml_text(raw), encoding="utf-8")
        seed = ["--seed", str(a.seed)]
        jax, jax_cpu = run(["reproduce", "digits-mlp", "--out", "j", *quick, *seed], folder)
        torch, torch_cpu = run(["run", "digits-torch.toml", "--out", "t", *quick, *seed], folder)
    rows = []
    for j, t in zip(jax["curves"], torch["curves"], strict=True):
        rows.append({
            "curve": j["label"], "jax_accuracy": j["test_accuracy"],
            "torch_accuracy": t["test_accuracy"], "jax_log_loss": j["test_log_loss"],
            "torch_log_loss": t["test_log_loss"],
        })  # fmt: skip
    result = {
        "iterations": jax["iterations"],
        "curves": rows,
        "max_accuracy_difference": max(abs(r["jax_accuracy"] - r["torch_accuracy"]) for r in rows),
        "max_log_loss_difference": max(abs(r["jax_log_loss"] - r["torch_log_loss"]) for r in rows),
        "jax_cpu_s": round(jax_cpu, 1),
        "torch_cpu_s": round(torch_cpu, 1),
    }
    if a.json:
        print(json.dumps(result, indent=2))
        return
    print(f"digits-mlp, {result['iterations']} iterations, seed {a.seed}")
    print(f"{'curve':<24} {'JAX acc':>8} {'torch acc':>9} {'JAX loss':>10} {'torch loss':>10}")
    for r in rows:
        print(f"{r['curve']:<24} {r['jax_accuracy']:>8.4f} {r['torch_accuracy']:>9.4f} "
              f"{r['jax_log_loss']:>10.6f} {r['torch_log_loss']:>10.6f}")  # fmt: skip
    print(f"largest differences: accuracy {result['max_accuracy_difference']:.3g}, "
          f"log-loss {result['max_log_loss_difference']:.3g}")  # fmt: skip
    print(f"CPU time: JAX {result['jax_cpu_s']} s, PyTorch {result['torch_cpu_s']} s")


if __name__ == "__main__":
    main()
