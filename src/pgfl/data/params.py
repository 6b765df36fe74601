"""The ``[data]`` settings of a configuration: which data set, its sizes and its skew.

Declared here, beside the generators and loaders that check their arguments with them
(:mod:`~pgfl.data.synthetic`, :mod:`~pgfl.data.digits`), and collected into the
configuration's table (:data:`pgfl.params.PARAMS`).
"""

from __future__ import annotations

from pgfl.param import Param, kind_is

__all__ = ["DATA_KINDS", "PARAMS"]

#: Kinds of data set: the papers' synthetic ones, real tabular data, the digits.
DATA_KINDS = ("regression", "logistic", "classification", "digits")

#: The ``[data]`` settings.
PARAMS = (
    Param("data.kind", "choice", "regression", "`regression` (preprint §V-A), `logistic` "
          "(conference §V), real-data `classification` (preprint §V-B) or `digits` "
          "(scikit-learn's 8×8 digits, 10 classes; needs a `[model]`).", choices=DATA_KINDS),
    Param("data.K", "int", 100, "Clients per unit K.", lo=1),
    Param("data.N", "int_pair", 100, "Samples per client, or a `[low, high]` range drawn "
          "uniformly per client.", lo=1, applies=kind_is("data", "regression", "logistic")),
    Param("data.M", "int", 2, "Model dimension M (features).", lo=1,
          applies=kind_is("data", "regression", "logistic")),
    Param("data.eigenvalues", "real_pair", (0.05, 0.1), "Range of the eigenvalues of each "
          "client's feature covariance.", lo=0, applies=kind_is("data", "regression")),
    Param("data.noise_variance", "real_pair", (0.01, 0.1), "Range of each client's "
          "observation-noise variance σ_v².", lo=0, applies=kind_is("data", "regression")),
    Param("data.feature_variance", "real_pair", (0.5, 2.0), "Range of each client's feature "
          "variance σ_h² (features ~ N(γ1, σ_h² I)).", lo=0, applies=kind_is("data", "logistic")),
    Param("data.test_size", "int", None, "Clean held-out test samples, drawn first. Unset: "
          "`classification` 256 (the papers'; a file with fewer than `data.rows` + 256 rows "
          "tests on a fifth of its rows, at least 20), `digits` 297, `logistic` none; `0`: "
          "no test set.", lo=0,
          applies=kind_is("data", "logistic", "classification", "digits")),
    Param("data.source", "string", "fair", "`fair`, `breast_cancer`, an Avazu CSV path, or "
          "`csv:PATH:LABEL` (see docs/data.md). A relative PATH is relative to the "
          "configuration file's folder (`pgfl reproduce --data`: to the current "
          "directory).", nonempty=True,
          applies=kind_is("data", "classification")),
    Param("data.rows", "int", None, "Training rows split unequally over the P·K clients "
          "(≥ 10 per client). Unset: 5101 (the papers'), or every row the test set leaves "
          "of a smaller file.", lo=1, applies=kind_is("data", "classification")),
    Param("data.drop", "strings", (), "Columns of a table to leave out: neither feature nor "
          "label (an ID, a timestamp, a column that leaks the label).",
          applies=kind_is("data", "classification")),
    Param("data.categorical", "strings", (), "Columns of a table to hash as categories "
          "although they hold numbers (integer codes: an occupation, a zip code); text "
          "columns are categorical anyway.", applies=kind_is("data", "classification")),
    Param("data.hash_dim", "int", None, "Hashed columns for categorical features (unset: 16 "
          "for tables, 256 for Avazu).", lo=1, applies=kind_is("data", "classification")),
    Param("data.feature_noise", "real_pair", (0.0, 1.0), "Per-client feature-noise scale, "
          "uniform in `[low, high]` (a number s: `[0, s]`).", lo=0,
          applies=kind_is("data", "classification")),
    Param("data.label_skew", "real", None, "Dirichlet concentration of label proportions: "
          "per client (`classification`), per unit over the classes (`digits`); unset: no "
          "skew.", lo=0, lo_open=True, applies=kind_is("data", "classification", "digits")),
    Param("data.size_skew", "real", 1.0, "Dirichlet concentration of the client sizes "
          "within a unit (`digits`; smaller: more unequal).", lo=0, lo_open=True,
          applies=kind_is("data", "digits")),
)  # fmt: skip
