"""The declarative parameter table: every entry rejects bad values with the standard message."""

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgfl import params
from pgfl.experiments import config
from pgfl.params import PARAMS, check, markdown
from pgfl.privacy import mechanisms
from pgfl.privacy.accounting import accountants as composition
from pgfl.privacy.secagg import SecAggConfig
from pgfl.validation import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SCALAR_KINDS = ("int", "real", "choice", "choices", "string", "int_pair", "real_pair")


def static_interval(p):
    """The range of a number as the message must show it, from the entry's static bounds."""
    left = "[" if p.lo is not None and not p.lo_open else "("
    lo = "-inf" if p.lo is None else f"{p.lo:g}"
    hi = "inf" if p.hi is None else f"{p.hi:g}"
    closed = p.kind in ("int", "int_pair") or p.inf_ok or (p.hi is not None and not p.hi_open)
    return f"{left}{lo}, {hi}{']' if closed else ')'}"


def not_a_number():
    return st.one_of(st.text(max_size=5), st.booleans(), st.lists(st.integers(), min_size=3))


def out_of_range(p):
    """Numbers outside the static range of a numeric entry."""
    integer = p.kind in ("int", "int_pair")
    number = st.integers if integer else st.floats
    parts = []
    if p.lo is not None:
        parts.append(
            number(max_value=p.lo - 1)
            if integer
            else st.floats(max_value=p.lo, exclude_max=not p.lo_open)
        )
    if p.hi is not None:
        parts.append(
            number(min_value=p.hi + 1)
            if integer
            else st.floats(min_value=p.hi, exclude_min=not p.hi_open)
        )
    if not integer:
        parts.append(st.sampled_from([math.nan, -math.inf] + ([] if p.inf_ok else [math.inf])))
    if p.even:
        parts.append(st.integers(min_value=0, max_value=1000).map(lambda i: 2 * i + 3))
    return st.one_of(*parts)


@pytest.mark.parametrize("name", [n for n, p in PARAMS.items() if p.kind in SCALAR_KINDS])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_entry_rejects_a_bad_value_naming_itself_its_range_and_the_value(name, data):
    p = PARAMS[name]
    if p.kind in ("choice", "choices"):
        value = data.draw(
            st.one_of(st.text(max_size=8).filter(lambda v: v not in p.options), st.integers())
        )
        with pytest.raises(ConfigError) as err:
            check(name, value)
        for choice in p.options:  # the allowed values are listed
            assert repr(choice) in str(err.value)
    elif p.kind == "string":
        bad = [st.integers(), st.floats(allow_nan=False)]
        if p.nonempty:
            bad.append(st.just(""))
        if p.forbid:
            bad.append(st.sampled_from(p.forbid).map(lambda c: f"a{c}b"))
        value = data.draw(st.one_of(*bad))
        with pytest.raises(ConfigError) as err:
            check(name, value)
    else:
        value = data.draw(st.one_of(out_of_range(p), not_a_number()))
        with pytest.raises(ConfigError) as err:
            check(name, value)
        assert static_interval(p) in str(err.value)
    message = str(err.value)
    assert message.startswith(f"{name} must be "), message
    # a mistyped choice may end with the closest one: "(did you mean 'none'?)"
    message = re.sub(r" \(did you mean '[^']*'\?\)$", "", message)
    assert message.endswith(f"; got {value!r}"), message


@pytest.mark.parametrize("name", [n for n, p in PARAMS.items() if p.kind.endswith("_pair")])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_pairs_need_low_at_most_high(name, data):
    p = PARAMS[name]
    integer = p.kind == "int_pair"
    lo = p.lo or 0
    number = st.integers(lo, 10**6) if integer else st.floats(lo, 1e6)
    a, b = data.draw(st.tuples(number, number).filter(lambda t: t[0] > t[1]))
    with pytest.raises(
        ConfigError, match=re.escape(f"{name}[1] must be ") + r".*" + re.escape(f"[{name}[0]=")
    ):
        check(name, [a, b])
    assert check(name, [b, a]) == (b, a)  # lists become tuples


def test_every_default_is_valid_and_kept():
    defaults = {n: p.default for n, p in PARAMS.items()}
    for p in PARAMS.values():
        if p.kind in ("edges", "matrix"):
            assert p.default is None  # required only where they apply
            continue
        assert p.check(p.default, defaults) == p.default


@settings(max_examples=200, deadline=None)
@given(K=st.integers(1, 1000), L=st.integers(-5, 1100))
def test_bound_on_another_setting_is_applied_and_named(K, L):
    if 1 <= L <= K:
        assert check("training.L", L, K=K) == L
    else:
        with pytest.raises(ConfigError, match=re.escape(f"in [1, data.K={K}]; got {L}")):
            check("training.L", L, K=K)
    assert check("training.L", max(L, 1)) == max(L, 1)  # without data.K only L >= 1 is checked


@settings(max_examples=300, deadline=None)
@given(
    L=st.integers(1, 10**5),
    clip=st.floats(1e-3, 1e6),
    f=st.integers(0, 40),
    k=st.integers(8, 64),
)
def test_modulus_must_hold_the_sum_of_L_codes(L, clip, f, k):
    if f > k - 2 or clip * 2.0**f <= 0.5:
        return
    code = int(np.rint(clip * 2.0**f))  # the secure aggregation's own encoding
    fits = code >= 1 and L * code < 2 ** (k - 1)
    ctx = {"L": L, "secagg_clip": clip, "secagg_frac_bits": f}
    if fits:
        assert check("privacy.secagg_modulus_bits", k, **ctx) == k
        assert L <= SecAggConfig(modulus_bits=k, frac_bits=f, clip=clip).max_clients
    else:
        with pytest.raises(
            ConfigError, match=r"secagg_modulus_bits must be an integer in \[1\+bit"
        ):
            check("privacy.secagg_modulus_bits", k, **ctx)


@settings(max_examples=200, deadline=None)
@given(L=st.integers(1, 60), t=st.integers(-2, 70), k=st.one_of(st.none(), st.integers(1, 40)))
def test_threshold_is_at_most_the_neighbourhood_size(L, t, k):
    k = None if k is None else 2 * k  # neighbours are even
    h = L if k is None or k >= L - 1 else k + 1
    if 1 <= t <= h:
        assert check("privacy.secagg_threshold", t, L=L, secagg_neighbours=k) == t
    else:
        with pytest.raises(ConfigError, match=re.escape(f"neighbourhood size={h}]; got {t}")):
            check("privacy.secagg_threshold", t, L=L, secagg_neighbours=k)


def test_frac_bits_at_most_modulus_minus_two():
    assert check("privacy.secagg_frac_bits", 30, secagg_modulus_bits=32) == 30
    msg = r"\[0, privacy.secagg_modulus_bits-2=30\]; got 31"
    with pytest.raises(ConfigError, match=msg):
        check("privacy.secagg_frac_bits", 31, secagg_modulus_bits=32)
    with pytest.raises(ConfigError, match=msg):  # dotted context names work too
        check("privacy.secagg_frac_bits", 31, **{"privacy.secagg_modulus_bits": 32})


def test_context_names_must_be_known_and_unambiguous():
    with pytest.raises(TypeError, match="ambiguous or unknown"):
        check("data.N", 5, kind="regression")  # topology.kind or data.kind?
    with pytest.raises(TypeError, match="ambiguous or unknown"):
        check("training.L", 5, bogus=1)
    with pytest.raises(KeyError):
        check("training.stepsize", 5)


def test_edges_and_matrix_entries():
    assert check("topology.edges", [[0, 1], [1, 2]], P=3) == ((0, 1), (1, 2))
    with pytest.raises(
        ConfigError, match=r"topology.edges\[1\] must be an integer in \[0, topology.P-1=2\]; got 3"
    ):
        check("topology.edges", [[0, 1], [1, 3]], P=3)
    with pytest.raises(
        ConfigError, match=r"topology.edges\[0\] must be a \[p, m\] pair; got \[0\]"
    ):
        check("topology.edges", [[0]], P=3)
    with pytest.raises(
        ConfigError, match="must connect all topology.P=4 servers; got 2 components"
    ):
        check("topology.edges", [[0, 1], [2, 3]], P=4)
    third = [[1 / 3] * 3] * 3
    assert check("topology.matrix", third, P=3) == tuple((1 / 3,) * 3 for _ in range(3))
    cases = [
        ([[0.5, 0.5], [0.5]], "got a ragged table"),
        ([[0.5, "a"], [0.5, 0.5]], "got 'a' at row 0, column 1"),
        ([[1.0]], "got 1 rows of 1 entries"),
        ([[0.5, 0.5], [0.5, 0.5]] + [[0, 0]], "got 3 rows of 2 entries"),
        ("I", "got 'I'"),
        ([[0.9, 0.1], [0.2, 0.8]], "topology.matrix: combination matrix must be symmetric"),
    ]
    for value, needle in cases:
        with pytest.raises(ConfigError, match=re.escape(needle)) as err:
            check("topology.matrix", value, P=2)
        assert str(err.value).startswith("topology.matrix")


def test_the_table_is_every_field_of_the_config_dataclasses():
    for section in config.SECTIONS:
        fields = {f"{section}.{f.name}" for f in dataclasses.fields(config.section_class(section))}
        assert fields == {p.name for p in params.section_params(section)}
    top = {f.name for f in dataclasses.fields(config.ExperimentConfig)} - {
        "curves",
        "source",
        "run",
        "deploy",
    }
    assert top == {p.name for p in params.section_params("")}
    run = {f"run.{f.name}" for f in dataclasses.fields(config.RunConfig)}
    assert run == {p.name for p in params.section_params("run")}
    deploy = {f"deploy.{f.name}" for f in dataclasses.fields(config.DeployConfig)}
    assert deploy == {p.name for p in params.section_params("deploy")}


def test_choices_agree_with_the_mechanism_registry():
    # the vocabularies are the registry's names: each builds an instance of its class, and
    # a scheme registered later is accepted by the table without touching it
    assert params.PARAMS["privacy.server_noise"].options == mechanisms.names("server")
    assert params.PARAMS["privacy.client_noise"].options == mechanisms.names("client")
    settings = {
        "privacy.server_variance": 0.1, "privacy.server_distribution": "laplace",
        "privacy.client_variance": 0.1, "privacy.neighbours": "client",
        # distributed DP clips a client's message to mu*B: a curve's training settings
        "training.mu": 0.5, "training.clip_norm": 1.0, "training.share": "models",
        **{p.name: p.default for p in mechanisms.params()},
    }  # fmt: skip
    for level in ("client", "server"):
        table = mechanisms.CLIENT if level == "client" else mechanisms.SERVER
        for name, cls in table.items():
            built = mechanisms.build(level, {**settings, f"privacy.{level}_noise": name})
            assert type(built) is cls and built.name == name
    assert params.ACCOUNTANTS == composition.ACCOUNTANTS  # the registry of accountant classes


def test_reference_lists_every_setting_once_and_is_committed():
    from pgfl.commands.config_reference import reference
    from pgfl.graphlearn.params import PARAMS as GRAPHLEARN

    text = markdown()
    for name in PARAMS:
        rows = [line for line in text.splitlines() if line.startswith(f"| `{name}`")]
        assert len(rows) == 1, name
    whole = reference()
    graph_part = whole[whole.index("# Graph-topology learning") :]
    for name in GRAPHLEARN:
        rows = [line for line in graph_part.splitlines() if line.startswith(f"| `{name}`")]
        assert len(rows) == 1, name
    committed = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert committed == whole, (
        "docs/config.md is stale: python -m pgfl.commands.config_reference > docs/config.md"
    )
