"""Every code block of the README and of docs/*.md runs (or says, in the page, why not).

How each fenced block is checked:

* ```` ```python ````: the blocks of one page run in order in one namespace, in a fresh
  process whose working folder is a temporary one (a traceback names the page and line);
* ```` ```toml ````: parsed, then validated by the project's loader: a whole experiment
  (with ``name`` or ``[[curves]]``) as it is, a fragment merged into :data:`MINIMAL`, a
  graph-learning config (an ``[algorithm]`` table) by :mod:`pgfl.graphlearn.config`;
* ```` ```bash ````, ```` ```sh ````, ```` ```console ````: every line is a ``pgfl``
  command (``.venv/bin/`` and ``# comments`` dropped, ``> FILE`` writes its output),
  parsed against the CLI and then run in the page's temporary folder, in order: as
  written (each such command takes under 30 s on 2 cores), or as the cheaper equivalent
  in :data:`CHEAPER` (a command that takes longer), or parsed only (:data:`PARSE_ONLY`);
  each entry says why. What the pages say the commands leave behind is checked
  (:data:`EXPECTED`);
* ```` ```text ````: not code (formulas, diagrams, file headers); a fence without a
  language fails the test, so that nothing is left unchecked by accident.

Two HTML comments, on the line right before a fence, say more:

* ``<!-- not run: REASON -->``: the block cannot run here (a Ray cluster, the network,
  packages pgfl does not depend on); it is still compiled (python), parsed (toml) or its
  ``pgfl`` lines parsed against the CLI (shell). The reason is required;
* ``<!-- file: NAME -->``: the block is a file the page's commands and Python use (a
  user's model, a config): it is written to ``NAME`` in the page's temporary folder before
  anything runs (a python file is not run in the page's namespace).

Files a page names without showing them (the reader's own CSV, an Avazu file, a small
config) are made by :data:`FIXTURES`. Pages that need an optional extra are skipped without
it (:data:`EXTRAS`; those that start a local Ray are marked ``ray``). The README's inline
commands and numeric claims are checked by ``tests/test_readme.py``. The whole module takes
1.5-2.5 minutes on 2 cores (about 70 s of CPU; the rest is waiting for Ray to start).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import pgfl
from pgfl.experiments.loader import parse_config
from pgfl.graphlearn import config as graphlearn_config

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: The folder holding the pgfl under test, for the processes the test starts.
PACKAGE_ROOT = str(Path(pgfl.__file__).resolve().parents[1])

LANGUAGES = {"python", "toml", "bash", "sh", "console", "text"}
SHELLS = {"bash", "sh", "console"}
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
NOT_RUN = re.compile(r"^<!-- not run: (\S.*?) -->$")
FILE = re.compile(r"^<!-- file: ([\w.\-/]+) -->$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository, e.g. "docs/models.md"
    line: int  # line of the block's first code line (1-based)
    lang: str
    text: str
    not_run: str | None  # the reason, if marked
    file: str | None  # the file it is, if marked


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out = []
    for m in FENCE.finditer(text):
        fence_line = text.count("\n", 0, m.start())  # 0-based index of the ``` line
        before = lines[fence_line - 1].strip() if fence_line else ""
        reason = NOT_RUN.match(before)
        file = FILE.match(before)
        out.append(
            Block(
                page=str(path.relative_to(ROOT)),
                line=fence_line + 2,
                lang=m.group(1).strip(),
                text=m.group(2),
                not_run=reason.group(1) if reason else None,
                file=file.group(1) if file else None,
            )
        )
    return out


ALL = {str(p.relative_to(ROOT)): blocks(p) for p in PAGES}


def pages_with(langs: set[str]) -> list[str]:
    return [page for page, bs in ALL.items() if any(b.lang in langs for b in bs)]


#: Optional extras a page's blocks need, per kind of test ("python", "shell"): the page's
#: test is marked ``ray`` where it starts a local Ray, and skipped where the extra is
#: missing (``make`` installs every extra).
EXTRAS = {
    ("python", "docs/models.md"): "jax",
    ("shell", "docs/models.md"): "jax",
    ("python", "docs/ray.md"): "ray",
    ("shell", "README.md"): "ray",
    ("shell", "docs/deploy.md"): "flwr",
}


def params(kind: str, pages: list[str]) -> list:
    """``pages`` as test parameters, marked ``ray`` where they start one.

    A page's blocks run in turn (a Ray session among other commands): its time bound is
    the suite's (20 minutes), not a Ray test's alone (tests/conftest.py).
    """
    out = []
    for page in pages:
        ray = EXTRAS.get((kind, page)) == "ray"
        marks = [pytest.mark.ray, pytest.mark.timeout(1200)] if ray else []
        out.append(pytest.param(page, marks=marks, id=page))
    return out


def need_extra(kind: str, page: str) -> None:
    if (kind, page) in EXTRAS:
        pytest.importorskip(EXTRAS[kind, page])


# ---------------------------------------------------------------------------- markers


def test_every_fence_has_a_language_and_every_marker_is_exact():
    for page, bs in ALL.items():
        for b in bs:
            assert b.lang in LANGUAGES, (
                f"{page}:{b.line - 1}: fence language {b.lang!r}; use one of "
                f"{sorted(LANGUAGES)} ('text' for what is not code)"
            )
            assert not (b.file and b.lang in SHELLS), f"{page}:{b.line}: a shell file block"
    for path in PAGES:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if "<!--" not in line or not re.search(r"not\s*run|file\s*:", line, re.I):
                continue
            where = f"{path.relative_to(ROOT)}:{i + 1}"
            assert NOT_RUN.match(line.strip()) or FILE.match(line.strip()), (
                f"{where}: write the marker exactly as '<!-- not run: REASON -->' or "
                f"'<!-- file: NAME -->'; got {line.strip()!r}"
            )
            assert i + 1 < len(lines) and lines[i + 1].startswith("```"), (
                f"{where}: a marker must be on the line right before a fence"
            )


def test_marked_blocks_still_parse():
    for page, bs in ALL.items():
        for b in bs:
            if b.not_run is None:
                continue
            if b.lang == "python":
                compile("\n" * (b.line - 1) + b.text, page, "exec")
            elif b.lang == "toml":
                tomllib.loads(b.text)
            elif b.lang in SHELLS:
                for cmd in commands(b):
                    if cmd[:1] == ["pgfl"]:
                        check_parses(cmd[1:], f"{page}:{b.line}")


# ---------------------------------------------------------------- files the pages name


def _churn_csv(path: Path) -> None:
    """``data/churn.csv`` of docs/data.md: a customer table with a two-valued label."""
    rng = np.random.default_rng(0)
    n = 1500
    tenure, spend = rng.integers(1, 72, n), rng.normal(50, 15, n).round(2)
    plan = rng.choice([101, 202, 303], n)
    churned = np.where(spend / 50 - tenure / 36 + rng.normal(0, 0.5, n) > 0, "yes", "no")
    rows = "".join(f"c{i},{plan[i]},{tenure[i]},{spend[i]},{churned[i]}\n" for i in range(n))
    path.write_text("customer_id,plan_code,tenure,spend,churned\n" + rows, encoding="utf-8")


def _avazu(path: Path) -> None:
    """``train.csv`` of docs/data.md: an Avazu-format file (enough rows for ``rows=5101``)."""
    from pgfl.data.avazu import write_synthetic_avazu

    write_synthetic_avazu(path, 6000, seed=1)


#: A small experiment for the pages' ``my.toml`` / ``fig.toml``: a curve ``c`` with noise.
SMALL = """name = "small"
iterations = 60
repetitions = 2
[topology]
kind = "ring"
P = 4
[data]
K = 10
N = 20
[training]
L = 3
clip_norm = 2.0
[[curves]]
label = "none"
[[curves]]
label = "c"
privacy = { server_noise = "random", server_variance = 0.1 }
"""

#: Files a page names but does not show (the reader's own), made before its blocks run.
FIXTURES: dict[str, dict[str, str | Callable[[Path], None]]] = {
    "docs/data.md": {"data/churn.csv": _churn_csv, "train.csv": _avazu},
    "docs/privacy.md": {"my.toml": SMALL},
    "docs/ray.md": {"fig.toml": SMALL},
}


def page_folder(page: str, tmp: Path) -> Path:
    """``tmp`` with the page's fixtures and file blocks written into it."""
    for name, make in FIXTURES.get(page, {}).items():
        target = tmp / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if callable(make):
            make(target)
        else:
            target.write_text(make, encoding="utf-8")
    for b in ALL[page]:
        if b.file is not None:
            (tmp / b.file).parent.mkdir(parents=True, exist_ok=True)
            (tmp / b.file).write_text(b.text, encoding="utf-8")
    return tmp


def environment() -> dict[str, str]:
    """This pgfl for every process started here, whatever its working folder."""
    path = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "PYTHONPATH": PACKAGE_ROOT + (os.pathsep + path if path else ""),
        "MPLBACKEND": "Agg",
    }


# ---------------------------------------------------------------------------- python

RUNNER = """
import json, sys
namespace = {"__name__": "__main__"}
for page, line, text in json.load(sys.stdin):
    exec(compile("\\n" * (line - 1) + text, page, "exec"), namespace)
"""


@pytest.mark.parametrize("page", params("python", pages_with({"python"})))
def test_python_blocks_run(page, tmp_path):
    need_extra("python", page)
    run = [
        (b.page, b.line, b.text)
        for b in ALL[page]
        if b.lang == "python" and b.not_run is None and b.file is None
    ]
    for b in ALL[page]:  # a file block is run by the commands that use it; here compiled
        if b.lang == "python" and b.file is not None:
            compile("\n" * (b.line - 1) + b.text, page, "exec")
    if not run:
        pytest.skip(f"{page}: every python block is a file or marked not run")
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(run),
        capture_output=True,
        text=True,
        cwd=page_folder(page, tmp_path),
        env=environment(),
        timeout=600,
    )
    assert proc.returncode == 0, f"{page}:\n{proc.stderr[-3000:]}"


# ------------------------------------------------------------------------------ toml

#: What a fragment (a few tables) is merged into before it is validated.
MINIMAL = {"name": "docs", "iterations": 10, "training": {"L": 1}}


def merged(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def test_toml_blocks_are_valid_configs(tmp_path):
    checked = 0
    for page, bs in ALL.items():
        for b in bs:
            if b.lang != "toml":
                continue
            where = f"{page}:{b.line}"
            try:
                raw = tomllib.loads(b.text)
            except tomllib.TOMLDecodeError as exc:
                pytest.fail(f"{where}: not TOML: {exc}")
            if b.not_run is not None:
                continue
            if "algorithm" in raw:  # graph learning
                graphlearn_config.parse_config(raw, base=tmp_path)
            elif "name" in raw or "curves" in raw:  # a whole experiment
                parse_config(raw, base=tmp_path)
            else:
                parse_config(merged(MINIMAL, raw), base=tmp_path)
            checked += 1
    assert checked >= 5


# ----------------------------------------------------------------------------- shell

#: Commands run as a cheaper equivalent: {as written: (what runs, why)}.
CHEAPER: dict[str, tuple[str, str]] = {
    "pgfl reproduce fig3 --backend ray --workers 2 --out runs/fig3-ray": (
        "pgfl reproduce fig3 --backend ray --workers 2 --out runs/fig3-ray --quick",
        "about 32 s as written on 2 cores (the local Ray's start included); --quick 23 s",
    ),
    "pgfl privacy audit fig2 --curve random --view message --trials 100000 --json": (
        "pgfl privacy audit fig2 --curve random --view message --trials 2000 --quick --json",
        "100,000 trials take about 50 s, with --quick or not; 2,000 take a few seconds",
    ),
}

#: Commands only parsed against the CLI: {as written: why}.
RAY_AGAIN = (
    "starts another local Ray (about 20 s on 2 cores); the README's "
    "'pgfl reproduce fig3 --backend ray' runs that path here and tests/backends/ test it"
)
PARSE_ONLY: dict[str, str] = {
    "pgfl run my_experiment.toml --backend ray": RAY_AGAIN,
    "pgfl run fig.toml --backend ray": RAY_AGAIN,
    "pgfl run fig.toml --backend ray --workers 2": RAY_AGAIN,
    "pgfl reproduce fig6 --backend ray --address HEAD:6379": "joins a Ray cluster; CI has none",
    "pgfl run big_network.toml --backend ray --mode actors --actors 8": (
        "8 Ray actors on a 2-core runner (a minute of start-up); tests/backends/ run the "
        "actors mode"
    ),
    "pgfl reproduce fig2 --backend ray --mode actors --address HEAD:6379": (
        "joins a Ray cluster; CI has none"
    ),
}

#: What the pages say their commands leave behind.
EXPECTED = {
    "README.md": [
        "runs/fig2/summary.json",
        "runs/fig2/curves.csv",
        "runs/fig2/figure.png",
        "my.toml",
        "runs/mine/summary.json",
        "runs/fig3-ray/summary.json",
        "runs/tuned/grid.csv",
    ],
    "docs/models.md": ["runs/custom/summary.json", "runs/custom/figure.png"],
    "docs/privacy.md": [
        "eps.png",
        "audit.png",
        "tuned-frontier/grid.csv",
        "tuned-frontier/regression-record-T20-proxy/summary.json",
    ],
    "docs/deploy.md": [
        "runs/deploy/summary.json",
        "runs/deploy/figure.png",
        "runs/deploy/logs/batch-000/coordinator.log",
        "certs/ca.pem",
        "certs/client-2-3.key",
        "wire/world-1/transcripts/batch-000/server-1.pgflwire",
    ],
}


def commands(b: Block) -> list[list[str]]:
    """The command lines of a shell block as words (continuations joined, comments gone)."""
    text = re.sub(r"\\\n", " ", b.text)
    out = []
    for line in text.splitlines():
        line = line.strip().removeprefix("$ ")
        words = shlex.split(line, comments=True)
        if words:
            words[0] = words[0].removeprefix(".venv/bin/")
            out.append(words)
    return out


def check_parses(args: list[str], where: str) -> None:
    """The arguments parse against the ``pgfl`` command line (nothing runs)."""
    import typer.main

    from pgfl.cli import app

    cmd = typer.main.get_command(app)
    try:
        ctx = cmd.make_context("pgfl", list(args))
        while hasattr(cmd, "resolve_command"):  # a group: on to the sub-command
            rest = [*getattr(ctx, "_protected_args", ()), *ctx.args]
            name, cmd, rest = cmd.resolve_command(ctx, rest)
            ctx = cmd.make_context(name, rest, parent=ctx)
    except Exception as exc:
        pytest.fail(f"{where}: 'pgfl {shlex.join(args)}' does not parse: {exc}")


def shell_pages() -> list[str]:
    return [
        p for p in pages_with(SHELLS) if any(b.not_run is None for b in ALL[p] if b.lang in SHELLS)
    ]


@pytest.mark.parametrize("page", params("shell", shell_pages()))
def test_shell_commands_run(page, tmp_path):
    need_extra("shell", page)
    folder = page_folder(page, tmp_path)
    for b in ALL[page]:
        if b.lang not in SHELLS:
            continue
        for words in commands(b):
            where = f"{page}:{b.line}"
            if b.not_run is not None:
                if words[0] == "pgfl":
                    check_parses(words[1:], where)
                continue
            written = shlex.join(words)
            assert words[0] == "pgfl", (
                f"{where}: {written!r} is not a pgfl command; mark the block "
                "'<!-- not run: REASON -->' if it cannot run here"
            )
            redirect = None
            if ">" in words:
                i = words.index(">")
                words, redirect = words[:i], words[i + 1 :]
                assert len(redirect) == 1, f"{where}: {written!r}: one file after '>'"
            shown = shlex.join(words)
            check_parses(words[1:], where)
            if shown in PARSE_ONLY:
                continue
            if shown in CHEAPER:
                words = shlex.split(CHEAPER[shown][0])
            proc = subprocess.run(
                [sys.executable, "-m", "pgfl.cli", *words[1:]],
                capture_output=True,
                text=True,
                cwd=folder,
                env=environment(),
                timeout=600,
            )
            assert proc.returncode == 0, f"{where}: {shown}\n{proc.stderr[-3000:]}"
            if redirect:
                (folder / redirect[0]).write_text(proc.stdout, encoding="utf-8")
    for name in EXPECTED.get(page, []):
        assert (folder / name).is_file(), f"{page}: the commands left no {name}"


def test_allowlists_name_commands_the_pages_show():
    shown = {
        shlex.join(w[: w.index(">")] if ">" in w else w)
        for bs in ALL.values()
        for b in bs
        if b.lang in SHELLS and b.not_run is None
        for w in commands(b)
    }
    for table in (CHEAPER, PARSE_ONLY):
        stale = set(table) - shown
        assert not stale, f"no page shows {sorted(stale)} any more; remove the entries"
    assert all(reason for _, reason in CHEAPER.values())
    assert all(PARSE_ONLY.values())
