"""Your own CSV from a configuration: data.drop, data.categorical, an ID warning, the split."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pgfl.data.datasets import DataWarning, split_sizes
from pgfl.experiments.build import build_network
from pgfl.experiments.loader import parse_config
from pgfl.validation import ConfigError


def churn_csv(path, n=300, seed=0):
    rng = np.random.default_rng(seed)
    x1, x2 = rng.standard_normal(n), rng.standard_normal(n)
    plan = rng.integers(1, 6, n)
    y = (x1 + 0.5 * x2 + 0.3 * plan + rng.standard_normal(n) > 1).astype(int)
    lines = ["customer_id,plan_code,x1,x2,churned"]
    lines += [f"{1000 + i},{plan[i]},{x1[i]:.6f},{x2[i]:.6f},{y[i]}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def config(tmp_path, **data):
    churn_csv(tmp_path / "churn.csv")
    raw = {
        "name": "churn",
        "iterations": 5,
        "plot": ["test_error"],
        "topology": {"kind": "ring", "P": 2},
        "data": {"kind": "classification", "source": "csv:churn.csv:churned", "K": 3, **data},
        "training": {"L": 2, "rho": 0.1},
    }
    return parse_config(raw, base=tmp_path)


def network(cfg):
    return build_network(cfg.curves[0], cfg.seed)


def test_drop_and_categorical_shape_the_features(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        every = network(config(tmp_path)).data.shape[-1]
    dropped = network(config(tmp_path, drop=["customer_id"])).data.shape[-1]
    hashed = network(config(tmp_path, drop=["customer_id"], categorical=["plan_code"]))
    # 4 numeric + intercept; without the ID 3 + 1; plan_code hashed: 2 numeric + 16 + 1
    assert (every, dropped, hashed.data.shape[-1]) == (5, 4, 19)


def test_a_column_that_looks_like_an_id_is_named_until_dropped(tmp_path):
    with pytest.warns(DataWarning, match=r"'customer_id'.*looks like an ID.*data.drop"):
        network(config(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        network(config(tmp_path, drop=["customer_id"]))  # no warning once dropped


def test_unknown_columns_and_lists_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"column\(s\) \['cust_id'\] not found"):
        network(config(tmp_path, drop=["cust_id"]))
    with pytest.raises(ConfigError, match="data.categorical must list distinct names"):
        config(tmp_path, categorical=["plan_code", "plan_code"])


def test_a_small_file_keeps_a_fifth_for_the_test_set(tmp_path):
    net = network(config(tmp_path, drop=["customer_id"]))  # 300 rows, split unset
    assert net.data.X_test.shape[0] == 60 and int(net.data.counts.sum()) == 240
    net = network(config(tmp_path, drop=["customer_id"], test_size=30, rows=200))
    assert net.data.X_test.shape[0] == 30 and int(net.data.counts.sum()) == 200


def test_test_size_zero_means_no_test_set(tmp_path):
    with pytest.raises(ConfigError, match="plot 'test_error' needs a test set"):
        config(tmp_path, drop=["customer_id"], test_size=0)
    cfg = parse_config(
        {**config(tmp_path).source, "plot": ["centroid_msd_db"],
         "data": {**config(tmp_path).source["data"], "test_size": 0, "drop": ["customer_id"]}}
    )  # fmt: skip
    assert network(cfg).data.X_test is None


def test_the_split_rule():
    # the papers' 5101 + 256 when the file holds them; a fifth for the test set otherwise
    assert split_sizes(6366, None, None) == (5101, 256)
    assert split_sizes(5357, None, None) == (5101, 256)
    assert split_sizes(5356, None, None) == (5100, 256)  # 256 = the cap on a fifth
    assert split_sizes(500, None, None) == (400, 100)
    assert split_sizes(50, None, None) == (30, 20)  # at least 20 test rows
    assert split_sizes(500, 100, None) == (100, 256)  # 100 + 256 fit: the papers' 256
    assert split_sizes(500, None, 50) == (450, 50)


def test_fair_with_the_defaults_is_the_papers_split():
    raw = {
        "name": "fair", "iterations": 2, "plot": ["test_error"],
        "topology": {"kind": "ring", "P": 5}, "data": {"kind": "classification", "K": 10},
        "training": {"L": 2, "rho": 0.03},
    }  # fmt: skip
    net = network(parse_config(raw))
    assert net.data.X_test.shape[0] == 256 and int(net.data.counts.sum()) == 5101
