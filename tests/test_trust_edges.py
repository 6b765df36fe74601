"""Silent wrong results and silent exits an unlucky user met (issue 26), each refused in words.

A rank-deficient least-squares risk with ``rho = 0``; a model file that calls
``sys.exit``, raises ``KeyboardInterrupt`` or never returns; configuration files that are
empty, start with a byte-order mark, nest 2·10⁵ deep or hold 10⁶ curves; worker processes
left behind by a killed run; a curve whose value comes from 1 repetition of 8; a partial
file whose arrays were altered; and the documentation's promises on secrets and backends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pgfl.apps.runner import run_experiment
from pgfl.experiments.loader import parse_config
from pgfl.experiments.plan import prepare_experiment
from pgfl.experiments.results import curve_metrics, summarize_curve
from pgfl.validation import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")


def pgfl_cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "pgfl.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=timeout)  # fmt: skip


def _one_error_line(proc: subprocess.CompletedProcess, code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    return lines[0].removeprefix("error: ")


# ------------------------------------------------- 5. a risk with no unique minimizer
RANK_DEFICIENT = {
    "name": "rank",
    "iterations": 5,
    "topology": {"kind": "ring", "P": 2},
    "data": {"K": 1, "N": 3, "M": 40},  # 6 samples in M = 40 dimensions
    "training": {"L": 1, "rho": 0.0},
}


def test_rho_zero_on_rank_deficient_data_is_refused_naming_rho(tmp_path):
    with pytest.raises(ConfigError, match=r"^training\.rho = 0: ") as err:
        prepare_experiment(parse_config(RANK_DEFICIENT), tmp_path / "out")
    assert "no unique minimizer" in str(err.value)
    assert not (tmp_path / "out").exists()
    # a regularized risk is well posed on the same data
    raw = {**RANK_DEFICIENT, "training": {"L": 1, "rho": 0.01}}
    assert prepare_experiment(parse_config(raw), tmp_path / "out").batches


def test_an_ill_conditioned_risk_is_refused_and_a_well_conditioned_one_runs(tmp_path):
    from pgfl.problems import LeastSquares, solve_optimum

    problem = LeastSquares(rho=0.0)
    R = np.diag([1.0, 1e-15])  # condition number 1e15: w° is noise in its second coordinate
    with pytest.raises(ConfigError, match=r"^training\.rho = 0: .*condition number"):
        solve_optimum(problem, lambda w: [(R, np.ones(2))], 1, 2)
    R = np.diag([1.0, 1e-3])
    np.testing.assert_allclose(solve_optimum(problem, lambda w: [(R, np.ones(2))], 1, 2),
                               [1.0, 1e3])  # fmt: skip


# -------------------------------------------------------- 6. and 10. the user's code
MODEL = """import sys
import jax
import numpy as np
{top}

def make(features, classes, rng):
{make}
    params = {{"w": np.zeros((features, classes))}}

    def loss(p, x, y):
{loss}
        z = x @ p["w"]
        return jax.nn.logsumexp(z) - z[y.astype(int)]

    return loss, params, lambda p, x: x @ p["w"]
"""

CONFIG = """name = "mine"
iterations = 3
plot = ["test_error"]
[topology]
kind = "ring"
P = 2
[data]
kind = "classification"
source = "csv:data.csv:y"
K = 2
rows = 60
test_size = 20
[training]
L = 2
[model]
kind = "custom"
source = "model.py:make"
{model}
"""


def _project(tmp_path: Path, *, top="", make="    pass", loss="        pass", model="") -> Path:
    pytest.importorskip("jax")
    (tmp_path / "model.py").write_text(MODEL.format(top=top, make=make, loss=loss))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    rows = "".join(f"{a},{b},{c},{int(a > 0)}\n" for a, b, c in X)
    (tmp_path / "data.csv").write_text("a,b,c,y\n" + rows, encoding="utf-8")
    (tmp_path / "c.toml").write_text(CONFIG.format(model=model), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("where", "code", "line"),
    [
        ({"top": "sys.exit(0)"}, "0", 4),  # at import
        ({"make": "    sys.exit(3)"}, "3", 7),  # in make
        ({"loss": "        sys.exit(0)"}, "0", 11),  # in loss, while traced
    ],
    ids=["import", "make", "loss"],
)
def test_sys_exit_in_a_model_file_is_the_users_error(tmp_path, where, code, line):
    project = _project(tmp_path, **where)
    proc = pgfl_cli("run", "c.toml", "--out", "out", cwd=project)
    message = _one_error_line(proc, 1)
    assert message.startswith(f"model.source {project / 'model.py'} raised SystemExit: {code}")
    assert f"model.py:{line}" in message
    assert not (project / "out" / "summary.json").exists()


def test_sys_exit_leaves_the_earlier_results_whole_and_unmixed(tmp_path):
    project = _project(tmp_path)
    assert pgfl_cli("run", "c.toml", "--out", "out", cwd=project).returncode == 0
    before = {p.name: p.read_bytes() for p in (project / "out").iterdir() if p.is_file()}
    _project(tmp_path, loss="        sys.exit(0)")  # edited: exits while traced
    proc = pgfl_cli("run", "c.toml", "--out", "out", "--force", cwd=project)
    assert "SystemExit" in _one_error_line(proc, 1)
    # the earlier results stay beside their own config.json; nothing of the failed run
    after = {p.name: p.read_bytes() for p in (project / "out").iterdir() if p.is_file()}
    assert after == before


def test_keyboard_interrupt_raised_by_a_model_is_not_a_ctrl_c(tmp_path):
    project = _project(tmp_path, make="    raise KeyboardInterrupt('from the model')")
    proc = pgfl_cli("run", "c.toml", "--out", "out", cwd=project)
    message = _one_error_line(proc, 1)
    assert "raised KeyboardInterrupt: from the model" in message and "model.py:7" in message
    assert "interrupted" not in proc.stderr


SWALLOWS = (  # a loop that swallows whatever is raised in it
    "    while True:\n        try:\n            pass\n        except BaseException:\n"
    "            pass"
)


@pytest.mark.parametrize(
    "loop", ["    while True:\n        pass", SWALLOWS], ids=["loop", "swallows"]
)
def test_a_model_that_never_returns_is_stopped_after_model_timeout(tmp_path, loop):
    project = _project(tmp_path, make=loop, model="timeout = 1")
    started = time.monotonic()
    proc = pgfl_cli("run", "c.toml", "--out", "out", cwd=project, timeout=120)
    message = _one_error_line(proc, 1)
    assert "did not return within model.timeout = 1 s" in message, message
    assert any(f"model.py:{n} in make" in message for n in range(7, 12))  # in the loop
    assert time.monotonic() - started < 60
    assert not (project / "out").exists()


def test_model_timeout_is_a_checked_setting():
    from pgfl.params import PARAMS

    with pytest.raises(ConfigError, match=r"^model\.timeout must be a real number in \(0, "):
        PARAMS["model.timeout"].check(0)


# ------------------------------------------------------ 7. and 10. configuration files
@pytest.mark.parametrize(
    ("content", "needles"),
    [
        (b"", ["empty"]),
        (b"# only a comment\n\n", ["empty"]),
        (b'\xef\xbb\xbfname = "bom"\n', ["byte-order mark"]),
        (("a = " + "[" * 200_000 + "]" * 200_000 + "\n").encode(), ["nested"]),
        ((("x." * 100_000) + "y = 1\n").encode(), ["nested"]),
    ],
    ids=["empty", "comment-only", "bom", "nested-arrays", "dotted-keys"],
)
def test_a_degenerate_config_file_is_one_line_exit_2(tmp_path, content, needles):
    (tmp_path / "c.toml").write_bytes(content)
    proc = pgfl_cli("run", "c.toml", "--out", "out", cwd=tmp_path)
    message = _one_error_line(proc, 2)
    assert "c.toml" in message and all(n in message for n in needles), message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]


def test_a_million_curves_are_refused_before_parsing(tmp_path):
    curve = '[[curves]]\nlabel = "c"\n'
    text = 'name = "many"\niterations = 2\n' + curve * 1_000_000
    (tmp_path / "c.toml").write_text(text, encoding="utf-8")
    started = time.monotonic()
    proc = pgfl_cli("run", "c.toml", "--out", "out", cwd=tmp_path, timeout=120)
    message = _one_error_line(proc, 2)
    assert "c.toml" in message and "MiB" in message, message
    assert time.monotonic() - started < 60
    assert not (tmp_path / "out").exists()


def test_more_curves_than_the_limit_are_refused_before_they_are_parsed():
    from pgfl.experiments.loader import MAX_CURVES

    raw = {"name": "many", "iterations": 2, "curves": [{"label": f"c{i}"}
                                                      for i in range(MAX_CURVES + 1)]}  # fmt: skip
    started = time.monotonic()
    with pytest.raises(ConfigError, match=rf"^curves: at most {MAX_CURVES} .*got {MAX_CURVES + 1}"):
        parse_config(raw)
    assert time.monotonic() - started < 5


def test_huge_iterations_are_refused_before_allocating(tmp_path):
    (tmp_path / "c.toml").write_text('name = "h"\niterations = 1000000000000\n')
    message = _one_error_line(pgfl_cli("run", "c.toml", "--out", "out", cwd=tmp_path), 2)
    assert message.startswith("iterations=1000000000000 needs about ")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------- 8. workers die with their driver
SECAGG = """name = "sa"
iterations = 100000
repetitions = 2
[topology]
kind = "ring"
P = 4
[data]
K = 16
N = 10
M = 8
[training]
L = 16
[privacy]
client_noise = "secure_aggregation"
secagg_protocol = "cryptographic"
"""


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(entry))
    return kids


def _descendants(pid: int) -> list[int]:
    kids, out, todo = _children(), [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table in /proc")
def test_secure_aggregation_workers_die_with_a_killed_driver(tmp_path):
    (tmp_path / "sa.toml").write_text(SECAGG, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen([sys.executable, "-m", "pgfl.cli", "run", "sa.toml", "--out", "o"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while len(_descendants(proc.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(1.0)
        helpers = _descendants(proc.pid)
        assert len(helpers) >= 3, "the secure-aggregation pool never started"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 20
    while any(map(_alive, helpers)) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [p for p in helpers if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert left == [], "orphans of the killed driver"


# --------------------------------------------- 9. a value from fewer than half the runs
def _trajectory(diverged: list[int], R: int = 8, T: int = 20):
    from types import SimpleNamespace

    rng = np.random.default_rng(len(diverged))
    msd = rng.uniform(0.01, 0.1, (T, R))
    at = np.full(R, -1)
    for r in diverged:
        at[r] = 3 + r
        msd[at[r] - 1 :, r] = np.nan
    return SimpleNamespace(centroid_msd=msd[:, None, :], individual_msd=2 * msd[:, None, :],
                           disagreement=msd[:, None, :] / 2, diverged_at=at[None, :],
                           test_error=None), msd  # fmt: skip


def test_a_value_from_fewer_than_half_the_repetitions_says_so():
    traj, msd = _trajectory([0, 1, 2, 3, 4, 5, 6])  # 7 of 8 diverged
    entry = summarize_curve("x", curve_metrics(traj, 0))
    assert entry["diverged"] is True  # not "false with the survivor's value"
    assert entry["finite_repetitions"] == 1 and entry["diverged_repetitions"] == 7
    survivor = 10 * np.log10(msd[-2:, 7].mean())
    assert entry["centroid_msd_db"] == pytest.approx(survivor, rel=1e-12)  # still reported
    # half or more finite: not diverged, the count still there
    for bad, finite in (([0, 1, 2, 3], 4), ([], 8)):
        entry = summarize_curve("x", curve_metrics(_trajectory(bad)[0], 0))
        assert entry["diverged"] is False and entry["finite_repetitions"] == finite


def test_the_summary_warns_at_its_top_about_a_mostly_diverged_curve(tmp_path):
    raw = {"name": "blow", "iterations": 30, "repetitions": 4, "seed": 1,
           "topology": {"kind": "ring", "P": 3}, "data": {"K": 4, "N": 8},
           "training": {"L": 2, "mu": 0.5},
           "curves": [{"label": "ok"}, {"label": "blowup", "training": {"mu": 80.0}}]}  # fmt: skip
    summary = run_experiment(parse_config(raw), tmp_path / "o")
    on_disk = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert on_disk["warnings"] == summary["warnings"]
    assert any("blowup" in w and "4 of 4 repetitions diverged" in w for w in on_disk["warnings"])
    assert not any("'ok'" in w for w in on_disk["warnings"])


# ------------------------------------------------ 11. partial files carry a checksum
def test_an_altered_partial_file_is_recomputed_not_resumed(tmp_path):
    raw = {"name": "sum", "iterations": 12, "repetitions": 2, "seed": 3,
           "topology": {"kind": "ring", "P": 3}, "data": {"K": 4, "N": 8},
           "training": {"L": 2}, "run": {"keep_partial": True}}  # fmt: skip
    cfg = parse_config(raw)
    first = run_experiment(cfg, tmp_path / "o")
    path = tmp_path / "o" / "partial" / "curve-000.npz"
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["centroid_msd"] = arrays["centroid_msd"] * 0.5  # same fingerprint, other values
    with path.open("wb") as fh:
        np.savez(fh, **arrays)
    with pytest.warns(UserWarning, match=r"curve-000\.npz .*checksum"):
        again = run_experiment(cfg, tmp_path / "o", resume=True)
    assert again["curves"] == first["curves"]


# ---------------------------------------- 11. the docs say where secrets and noise come from
def test_the_docs_say_pairwise_secrets_are_keyed_draws_in_simulation():
    text = (ROOT / "docs" / "privacy.md").read_text(encoding="utf-8")
    start = "| server `pairwise_cancelling`"
    (row,) = [line for line in text.splitlines() if line.startswith(start)]
    assert "keyed" in row and "seed" in row, row


def test_the_docs_promise_bit_identity_only_where_it_holds():
    """Ray actors and the local engine agree to 1e-12, not bit for bit: the docs say so."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ray_section = readme.split("## Running on a Ray cluster", 1)[1].split("\n## ", 1)[0]
    for doc, text in (
        ("README.md", ray_section),
        ("docs/ray.md", (ROOT / "docs" / "ray.md").read_text(encoding="utf-8")),
    ):
        text = " ".join(text.split())
        at = text.find("bit for bit")
        assert at >= 0, doc
        said = text[at : at + 400]
        assert "actors" in said and "1e-12" in said, (doc, said)
