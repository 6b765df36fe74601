"""The [run] table and the CLI's --backend options (no Ray started here)."""

import sys
from pathlib import Path

import pytest

from pgfl.backends import LocalBackend, make_backend
from pgfl.cli import main
from pgfl.commands.common import with_run_options
from pgfl.experiments.config import RunConfig
from pgfl.experiments.loader import parse_config
from pgfl.experiments.plan import prepare_experiment
from pgfl.extras import MissingExtra
from pgfl.param import SettingWarning
from pgfl.validation import ConfigError

BASE = {"name": "x", "iterations": 5, "topology": {"kind": "ring", "P": 3},
        "data": {"K": 5, "N": 8}, "training": {"L": 2}}  # fmt: skip


def test_run_table_is_parsed_and_left_out_of_the_fingerprint(tmp_path):
    cfg = parse_config({**BASE, "run": {"backend": "ray", "workers": 2, "mode": "tasks"}})
    assert (cfg.run.backend, cfg.run.workers, cfg.run.address) == ("ray", 2, None)
    plain = parse_config(BASE)
    assert plain.run == RunConfig() and plain.run.backend == "local"
    # a run resumes on another backend: the fingerprint does not see [run]
    a = prepare_experiment(cfg, tmp_path / "a").fingerprint
    assert a == prepare_experiment(plain, tmp_path / "a").fingerprint
    assert isinstance(make_backend(plain.run), LocalBackend)


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"backend": "gpu"}, "run.backend must be one of"),
        ({"backend": "ray", "workers": 0}, "run.workers must be an integer in [1, inf]; got 0"),
        ({"backend": "ray", "mode": "threads"}, "run.mode must be one of"),
        ({"backend": "ray", "cores": 2}, "unknown setting run.cores"),
        ({"backend": "ray", "address": ""}, "run.address"),
        ({"backend": "ray", "mode": "actors", "checkpoint_every": 0}, "run.checkpoint_every"),
    ],
)
def test_bad_run_settings_name_the_setting(run, message):
    with pytest.raises(ConfigError) as err:
        parse_config({**BASE, "run": run})
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"workers": 2}, 'run.workers = 2 has no effect: it needs run.backend = "ray"'),
        ({"backend": "ray", "actors": 4}, "run.actors = 4 has no effect"),
        ({"backend": "ray", "address": "auto", "workers": 2}, "run.workers = 2 has no effect"),
    ],
)
def test_run_settings_without_effect_are_warnings(run, message):
    with pytest.warns(SettingWarning) as caught:
        cfg = parse_config({**BASE, "run": run})
    assert any(message in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert cfg.run.backend == run.get("backend", "local")


def _toml(tmp_path, run=""):
    path = tmp_path / "x.toml"
    path.write_text(
        'name = "x"\niterations = 5\n[topology]\nkind = "ring"\nP = 3\n[data]\nK = 5\nN = 8\n'
        f"[training]\nL = 2\n{run}"
    )
    return str(path)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--backend", "gpu"], "--backend must be one of"),
        (["--backend", "ray", "--workers", "0"], "--workers must be an integer in [1, inf]; got 0"),
        (["--backend", "ray", "--mode", "threads"], "--mode must be one of"),
    ],
)
def test_bad_cli_options_give_one_line_and_exit_2(tmp_path, capsys, args, needle):
    with pytest.raises(SystemExit) as exit_:
        main(["run", _toml(tmp_path), "--out", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and needle in err
    assert not (tmp_path / "o").exists()


def test_an_option_without_effect_is_one_warning_line_and_the_run_goes_on(tmp_path, capsys):
    main(["run", _toml(tmp_path), "--out", str(tmp_path / "o"), "--workers", "2", "--json"])
    err = capsys.readouterr().err.splitlines()
    assert err == [
        'warning: --workers = 2 has no effect: it needs run.backend = "ray" without '
        "run.address (give --backend ray, no --address)"
    ]
    assert (tmp_path / "o" / "summary.json").is_file()


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"backend": "ray", "address": "auto", "workers": 2}, "(give --backend ray, no --address)"),
        ({"backend": "ray", "actors": 2}, "--actors = 2 has no effect"),
    ],
)
def test_ray_options_without_effect_warn_and_are_dropped(options, needle):
    cfg = parse_config(BASE)
    with pytest.warns(SettingWarning) as caught:
        got = with_run_options(cfg, **options)
    assert any(needle in str(w.message) for w in caught)
    assert got.run.backend == "ray" and got.run.workers is None and got.run.actors is None


def test_backend_local_overrides_the_file_and_its_ray_settings(tmp_path, capsys):
    config = _toml(tmp_path, '[run]\nbackend = "ray"\naddress = "10.0.0.1:6379"\nmode = "tasks"\n')
    main(["run", config, "--out", str(tmp_path / "o"), "--backend", "local", "--json"])
    assert (tmp_path / "o" / "summary.json").is_file()
    assert not list((tmp_path / "o" / "partial").glob("task-*"))  # no Ray task ran
    capsys.readouterr()


def test_without_ray_the_backend_stops_with_one_line_naming_the_extra(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray → ImportError
    with pytest.raises(MissingExtra, match=r"pip install 'pgfl\[ray\]'"):
        make_backend(RunConfig(backend="ray"))
    for command in (["run", _toml(tmp_path)], ["reproduce", "fig2", "--quick"]):
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--out", str(tmp_path / "o"), "--backend", "ray"])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err.count("\n") == 1
        assert "--backend ray needs the optional package 'ray'" in err
        assert not (tmp_path / "o").exists()


def test_a_stopped_run_is_one_line_and_exit_1(capsys):
    from pgfl.backends import RunStopped
    from pgfl.cli import _exit_for

    exit_ = _exit_for(RunStopped("2 task(s) failed; rerun with --resume to continue"))
    err = capsys.readouterr().err
    assert exit_.code == 1
    assert err == "error: run stopped: 2 task(s) failed; rerun with --resume to continue\n"


@pytest.mark.ray
def test_an_address_without_a_cluster_is_one_line_exit_2_and_nothing_written(tmp_path):
    import os
    import subprocess

    pytest.importorskip("ray")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[2] / "src"), env.get("PYTHONPATH", "")]
    )
    run = subprocess.run(
        [sys.executable, "-m", "pgfl.cli", "run", _toml(tmp_path), "--out", str(tmp_path / "o"),
         "--backend", "ray", "--address", "127.0.0.1:9"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.startswith("error: run.address: cannot join the Ray cluster at '127.0.0.1:9'")
    assert run.stderr.count("\n") == 1
    assert not (tmp_path / "o").exists()
