"""Memory estimates: closed forms, the refusal message, and a bound on measured peaks."""

import tracemalloc
from pathlib import Path

import pytest

from pgfl import resources
from pgfl.engine import simulate
from pgfl.experiments.build import build_network, curve_settings
from pgfl.experiments.loader import parse_config
from pgfl.experiments.memory import experiment_memory
from pgfl.resources import (
    accounting_memory,
    available_memory,
    check_fits,
    format_bytes,
    simulation_memory,
)
from pgfl.validation import ConfigError


def test_format_bytes_uses_binary_units():
    assert format_bytes(0) == "0 B"
    assert format_bytes(1023) == "1.02e+03 B"
    assert format_bytes(1024) == "1 KiB"
    assert format_bytes(3 * 2**30) == "3 GiB"
    assert format_bytes(14.6 * 2**40) == "14.6 TiB"


def test_closed_forms_of_the_terms():
    sizes = dict(P=3, K=5, N=7, M=2, L=4, E=2, B=3, C=2, R=6, T=100)
    t = simulation_memory(**sizes)
    assert t["metrics [T, C, R]"] == 8 * 100 * 2 * 6 * 3
    assert t["models [C, R, P, M]"] == 8 * 6 * 2 * 6 * 3 * 2
    assert t["kept models [64, C, R, P, M]"] == 8 * 4 * 64 * 2 * 6 * 3 * 2
    assert t["combination matrix [P, P]"] == 8 * 3 * 9
    # the samples once and two floats each, a one-client chunk ×6, eigenvalues and counts,
    # one client's covariance factors ×8
    assert t["data [P, K, N, M+1]"] == 8 * (3 * 5 * 7 * 5 + 6 * 7 * 3 + 3 * 5 * 4 + 8 * 4)
    # a test set adds two [T, C, R] metrics and the servers' [T, C, R, P], and the margins
    tt = simulation_memory(**sizes, test_size=10, covariances=False)
    assert tt["metrics [T, C, R]"] == 8 * 100 * 2 * 6 * (3 + 2 + 3)
    assert tt["test margins [64, C, R, P, N_test]"] == 8 * 3 * 64 * 2 * 6 * 4 * 10
    # fewer iterations than the kept chunk keep only T models
    short = simulation_memory(**{**sizes, "T": 5})
    assert short["kept models [64, C, R, P, M]"] == 8 * 4 * 5 * 2 * 6 * 3 * 2


def test_accounting_memory_is_linear_in_the_iterations():
    assert accounting_memory(1000, ["paper"]) == 1000 * resources.ACCOUNTING_BYTES_DEFAULT
    assert accounting_memory(1000, ["paper", "pld"]) == 1000 * 6144
    assert accounting_memory(1000, []) == 0


def test_check_fits_names_the_largest_term_and_what_is_available():
    terms = {"a [T]": 10, "b [P]": 3 * 2**30}
    assert check_fits("x=1", terms, available=4 * 2**30) == 3 * 2**30 + 10
    with pytest.raises(ConfigError) as err:
        check_fits("x=1", terms, available=2**30)
    assert str(err.value) == (
        "x=1 needs about 3 GiB of memory (b [P]); this machine has 1 GiB available"
    )
    with pytest.raises(ConfigError, match=r"^n=5 needs about 2 KiB of memory; this machine"):
        check_fits("n=5", 2048, available=1024)


def test_check_fits_checks_nothing_when_the_system_does_not_say(monkeypatch):
    monkeypatch.setattr(resources, "available_memory", lambda: None)
    assert check_fits("x", 2**80) == 2**80


def test_available_memory_is_at_most_the_physical_memory():
    avail = available_memory()
    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        pytest.skip("no /proc/meminfo")
    total = next(
        int(line.split()[1]) * 1024
        for line in meminfo.read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    assert avail is not None and 0 < avail <= total


def test_a_run_takes_the_largest_batch_plus_what_every_curve_keeps():
    raw = {
        "name": "m",
        "iterations": 50,
        "repetitions": 2,
        "topology": {"kind": "ring", "P": 3},
        "data": {"K": 10, "N": 20},
        "training": {"L": 2, "epochs": 1, "batch": 4},
        "curves": [
            {"label": "a"},
            {"label": "b", "training": {"mu": 0.1}},
            {"label": "big", "training": {"L": 10}},
        ],
    }
    terms, sizes = experiment_memory(parse_config(raw))
    big = simulation_memory(P=3, K=10, N=20, M=2, L=10, E=1, B=4, C=1, R=2, T=50)
    small = simulation_memory(P=3, K=10, N=20, M=2, L=2, E=1, B=4, C=2, R=2, T=50)
    assert sum(big.values()) > sum(small.values())
    assert {k: terms[k] for k in big} == big
    assert terms["results [T, curves]"] == 50 * 3 * (8 * 9 + resources.CSV_ROW_BYTES)
    assert terms["ε accounting [T]"] == 0  # no privatized curve
    assert sizes["curves"] == 3 and sizes["C"] == 1


def _raw(T=2, R=1, P=4, K=10, N=20, M=2, L=3, E=(1, 3), B=(2, 4), C=1, kind="regression", test=0):
    data = {"kind": kind, "K": K, "N": N, "M": M}
    if test:
        data["test_size"] = test
    return {
        "name": "m",
        "iterations": T,
        "repetitions": R,
        "topology": {"kind": "ring", "P": P},
        "data": data,
        "training": {"L": L, "epochs": E, "batch": B, "clip_norm": 2.0},
        "curves": [{"label": f"c{i}", "training": {"mu": 0.05 + 0.01 * i}} for i in range(C)],
    }


def _high(v):
    return v[1] if isinstance(v, tuple) else v


@pytest.mark.parametrize(
    "sizes",
    [
        dict(P=4, K=50, N=500, M=8, L=2),  # data
        dict(P=2, K=10, N=5, M=120, L=2),  # covariance factors [P, K, M, M]
        dict(R=20, P=5, K=40, N=50, M=6, L=40, E=(5, 10), B=(10, 20), C=3),  # a round
        dict(R=10, P=5, K=20, N=100, M=6, L=20, B="full", C=2),  # a full-batch round
        dict(T=64, R=300, P=10, K=1, N=5, M=10, L=1, E=1, B=1, C=3),  # kept models
        dict(T=200, R=1000, P=2, K=1, N=5, M=1, L=1, E=1, B=1, C=4),  # metrics
        dict(T=64, R=30, P=20, K=2, N=5, L=1, E=1, B=1, C=3, kind="logistic", test=100),
    ],
)
def test_the_estimate_bounds_the_measured_peak_of_a_simulation(sizes, monkeypatch):
    # the estimate is for the numpy local phase (the reference path, and the one user losses
    # take); the compiled path gathers no mini-batch copies and allocates outside tracemalloc
    monkeypatch.setenv("PGFL_LOCAL_PHASE", "numpy")
    cfg = parse_config(_raw(**sizes))
    c = cfg.curves[0]
    d, t = c.data, c.training
    estimate = sum(
        simulation_memory(
            P=c.topology.P,
            K=d.K,
            N=_high(d.N),
            M=d.M,
            L=t.L,
            E=_high(t.epochs),
            B=None if t.batch == "full" else _high(t.batch),
            C=len(cfg.curves),
            R=cfg.repetitions,
            T=cfg.iterations,
            test_size=d.test_size,
            covariances=d.kind == "regression",
        ).values()
    )
    tracemalloc.start()
    try:
        net = build_network(c, cfg.seed)
        simulate(
            net,
            [curve_settings(x, cfg.iterations, net) for x in cfg.curves],
            iterations=cfg.iterations,
            repetitions=cfg.repetitions,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= estimate <= 3 * peak, (format_bytes(peak), format_bytes(estimate))


def test_privacy_epsilon_refuses_iterations_that_cannot_fit(capsys):
    from pgfl.cli import main

    args = ["privacy", "epsilon", "--mu", "0.5", "--clip", "1", "--sigma", "1", "--dim", "2"]
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--iterations", str(10**12)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: --iterations=1000000000000 needs about ")
    assert "(ε accounting [T])" in err[0] and err[0].endswith("available")
    with pytest.raises(SystemExit) as exit_:
        main(["privacy", "calibrate", "--target-epsilon", "1", "--mu", "0.5", "--clip", "1",
              "--dim", "2", "--iterations", str(10**12)])  # fmt: skip
    assert exit_.value.code == 2
    assert "--iterations=1000000000000 needs about" in capsys.readouterr().err
