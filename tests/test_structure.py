"""The structure the code must keep: layers without circles, small functions, one range per
setting, and a privacy scheme that is one object a new module can add."""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from tests.import_graph import FLOORS, circles, floor, imports, modules, upward

from pgfl.apps.runner import run_experiment
from pgfl.experiments.loader import parse_config
from pgfl.graphlearn.params import PARAMS as GRAPHLEARN_PARAMS
from pgfl.params import PARAMS
from pgfl.privacy import mechanisms
from pgfl.privacy.accounting import Transcript
from pgfl.privacy.mechanisms.server import SERVER_DISTRIBUTION, SERVER_VARIANCE

SRC = Path(__file__).resolve().parents[1] / "src" / "pgfl"
#: Longest function body in lines of code (docstring excluded).
MAX_FUNCTION_LINES = 80


# -------------------------------------------------------------------------- layers
def test_the_import_graph_has_no_circle_and_no_import_goes_up_a_floor():
    edges = imports()
    assert circles(edges) == []
    assert upward(edges) == []
    assert all(floor(m) >= 1 for m in modules())  # every module has a floor


def test_every_package_sits_on_one_floor_and_the_engine_reads_no_experiment_table():
    # a floor is a whole top-level package or module (no package spans two floors) ...
    assert all(name.count(".") == 1 for name in FLOORS if name != "pgfl")
    # ... and the engine takes its settings from the modules that own them
    edges = imports()
    engine = {m: sorted(t for t in ts if t.startswith("pgfl.params"))
              for m, ts in edges.items() if m.startswith("pgfl.engine")}  # fmt: skip
    assert {m: ts for m, ts in engine.items() if ts} == {}


def test_the_graph_sees_function_local_imports():
    # the checker must count an import inside a function (else it could hide a circle)
    edges = imports()
    assert "pgfl.apps.runner" in edges["pgfl.commands.common"]  # imported lazily


# ------------------------------------------------------------------------ functions
def _function_lengths():
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = node.body[0]
                docstring = isinstance(first, ast.Expr) and isinstance(
                    getattr(first, "value", None), ast.Constant
                )
                start = first.end_lineno + 1 if docstring else first.lineno
                yield node.end_lineno - start + 1, f"{path.relative_to(SRC)}:{node.name}"


def test_no_function_is_longer_than_the_limit():
    long = sorted((n, where) for n, where in _function_lengths() if n > MAX_FUNCTION_LINES)
    assert long == []


def _unexplained_local_imports(text: str) -> list[int]:
    """Lines of function-local import groups none of whose lines says ``# lazy:`` why.

    A group is a run of import statements one after another in one body (they share the
    reason one of them gives).
    """
    lines, out = text.splitlines(), []
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        bodies = (getattr(node, field, None) for node in ast.walk(fn) for field in _BODIES)
        for body in (b for b in bodies if isinstance(b, list)):
            group: list[ast.stmt] = []
            for stmt in [*body, None]:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    group.append(stmt)
                    continue
                said = any("# lazy:" in line for g in group
                           for line in lines[g.lineno - 1 : g.end_lineno])  # fmt: skip
                if group and not said:
                    out.append(group[0].lineno)
                group = []
    return out


_BODIES = ("body", "orelse", "finalbody")


def test_the_lazy_import_check_finds_an_unexplained_one():
    text = "def f():\n    import json\n    import os  # lazy: why\n\n    import re\n    x = 1\n"
    assert _unexplained_local_imports(text) == []  # one group: json, os, blank, re
    assert _unexplained_local_imports("def f():\n    x = 1\n    import re\n") == [3]
    assert _unexplained_local_imports("import re\ndef f():\n    if 1:\n        import re\n") == [4]


def test_every_function_local_import_says_why():
    found = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        for line in _unexplained_local_imports(path.read_text(encoding="utf-8"))
    ]
    assert found == []


# ---------------------------------------------------------------- one range per setting
_CHECK_CALL = re.compile(r"check_(?:int|real|choice|string)\(\s*f?[\"']([^\"'{]+)[\"']")
#: Command-line options that mirror a setting: they must be checked by its Param.
_MIRRORED_OPTIONS = {"--mu", "--seed", "--iterations", "--repetitions", "--delta", "--clip",
                     "--dim", "--epsilon", "--target-epsilon", "--variance"}  # fmt: skip


def test_no_range_of_a_setting_is_checked_outside_its_param():
    names = set(PARAMS) | set(GRAPHLEARN_PARAMS)
    found = []
    for path in SRC.rglob("*.py"):
        if path.name in ("param.py", "validation.py"):  # the checkers and their examples
            continue
        for m in _CHECK_CALL.finditer(path.read_text(encoding="utf-8")):
            if m.group(1) in names or m.group(1) in _MIRRORED_OPTIONS:
                found.append(f"{path.relative_to(SRC)}: {m.group(1)}")
    assert found == []


def test_a_mirrored_option_reports_the_settings_name(capsys):
    from pgfl.cli import main

    with pytest.raises(SystemExit) as exc:
        main(
            ["privacy", "epsilon", "--mu", "-1", "--iterations", "3", "--sigma", "1", "--dim", "2"]
        )
    assert exc.value.code == 2
    assert "training.mu (--mu) must be a real number in (0, inf); got -1" in capsys.readouterr().err


# ------------------------------------------------------------ a scheme is one object
@dataclass(frozen=True, kw_only=True)
class HalfCopyNoise(mechanisms.ServerNoise):
    """A test scheme: one Gaussian draw per server, on every link, written from scratch."""

    std: float = 0.0
    variance: float | None = None
    names: ClassVar[tuple[str, ...]] = ("test_half_copy",)
    params: ClassVar = (SERVER_VARIANCE, SERVER_DISTRIBUTION)
    calibrates: ClassVar = "privacy.server_variance"
    protects: ClassVar = ("link_eavesdropper",)

    @classmethod
    def from_settings(cls, s):
        return cls(std=math.sqrt(s["privacy.server_variance"]))

    def with_std(self, std):
        return HalfCopyNoise(std=std)

    def transcript(self, ctx):
        # each message: the unit's mean of L clipped steps, sensitivity 2μB/L, Gaussian noise
        sens = (2 * ctx.mu * ctx.clip / ctx.clients_per_round,) * ctx.iterations
        return Transcript(sens, std=self.std, distribution="gaussian", dim=ctx.dim,
                          scope="test scope: one server's messages")  # fmt: skip

    @classmethod
    def link_noise(cls, schemes, links, dim, ctx):
        std = np.array([s.std for s in schemes])[:, None, None, None]
        g = ctx.draws.noise("server_noise", "gaussian", (dim,))[:, links.src - ctx.start]
        return std * g


@pytest.fixture
def registered():
    mechanisms.register(HalfCopyNoise)
    yield
    del mechanisms.SERVER["test_half_copy"]


def test_a_scheme_defined_here_runs_with_its_epsilon_in_the_summary(registered, tmp_path):
    raw = {
        "name": "own-scheme", "iterations": 20, "repetitions": 2,
        "topology": {"kind": "ring", "P": 4}, "data": {"K": 6, "N": 10},
        "training": {"L": 3, "mu": 0.3, "clip_norm": 1.0},
        "privacy": {"server_variance": 0.04, "server_distribution": "gaussian",
                    "accountants": ["pld"]},
        "curves": [
            {"label": "mine", "privacy": {"server_noise": "test_half_copy"}},
            {"label": "builtin", "privacy": {"server_noise": "random"}},
        ],
    }  # fmt: skip
    summary = run_experiment(parse_config(raw), tmp_path / "out")
    mine, builtin = summary["curves"]
    assert mine["epsilon_scope"] == "test scope: one server's messages"
    # the same noise and release as the built-in random Gaussian noise, by construction
    assert mine["centroid_msd_db"] == builtin["centroid_msd_db"]
    assert mine["epsilon"]["pld"] == pytest.approx(builtin["epsilon"]["pld"], rel=1e-12)
    assert math.isfinite(mine["epsilon"]["pld"]) and mine["epsilon"]["pld"] > 0


def test_a_scheme_defined_here_is_calibrated_to_a_target(registered, tmp_path):
    raw = {
        "name": "own-target", "iterations": 10, "topology": {"kind": "ring", "P": 3},
        "data": {"K": 4, "N": 8}, "training": {"L": 2, "mu": 0.3, "clip_norm": 1.0},
        "privacy": {"server_noise": "test_half_copy", "server_distribution": "gaussian",
                    "target_epsilon": 2.0, "accountants": ["pld"]},
    }  # fmt: skip
    summary = run_experiment(parse_config(raw), tmp_path / "out")
    (curve,) = summary["curves"]
    assert curve["epsilon"]["pld"] <= 2.0
    assert curve["epsilon"]["pld"] == pytest.approx(2.0, rel=1e-3)
    assert curve["settings"]["server_variance"] == pytest.approx(curve["noise_variance"])
