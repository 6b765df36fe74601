import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgfl.topology import (
    TOPOLOGIES,
    build_graph,
    check_combination_matrix,
    combination_matrix,
    graph_from_edges,
    iota2,
)
from pgfl.validation import ConfigError


@pytest.mark.parametrize("kind", TOPOLOGIES)
@pytest.mark.parametrize("rule", ["metropolis", "max_degree"])
def test_every_topology_gives_a_matrix_satisfying_assumption_1(kind, rule):
    g = build_graph(kind, 12, rng=np.random.default_rng(0), probability=0.3, radius=0.5)
    assert nx.is_connected(g) and g.number_of_nodes() == 12
    A = combination_matrix(g, rule)
    rate = check_combination_matrix(A, need_self_weights=True)
    assert 0 <= rate < 1
    # weights only on edges and the diagonal
    off = (A > 0) & ~np.eye(12, dtype=bool)
    edges = {tuple(sorted(e)) for e in zip(*np.nonzero(off), strict=True)}
    assert edges == {tuple(sorted(e)) for e in g.edges()}


def test_complete_graph_closed_form():
    A = combination_matrix(nx.complete_graph(4))
    np.testing.assert_allclose(A, np.full((4, 4), 0.25))
    assert iota2(A) == 0.0


def test_ring_iota2_closed_form():
    # Metropolis on a ring: a = 1/3 everywhere on the band; eigenvalues (1 + 2 cos(2 pi j / P)) / 3
    P = 8
    A = combination_matrix(nx.cycle_graph(P))
    eig = (1 + 2 * np.cos(2 * np.pi * np.arange(1, P) / P)) / 3
    assert iota2(A) == pytest.approx(np.abs(eig).max(), abs=1e-12)


def test_grid_and_torus_shapes():
    assert build_graph("grid", 12, rows=3).number_of_edges() == 3 * 3 + 2 * 4
    assert build_graph("torus", 12, rows=3).number_of_edges() == 24
    with pytest.raises(ConfigError, match="topology.rows must divide P=12; got 5"):
        build_graph("grid", 12, rows=5)


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 15), st.integers(0, 10**6), st.sampled_from(["metropolis", "max_degree"]))
def test_random_connected_graphs_give_valid_matrices(P, seed, rule):
    g = build_graph("erdos_renyi", P, rng=np.random.default_rng(seed), probability=0.5)
    A = combination_matrix(g, rule)
    assert np.allclose(A, A.T) and np.allclose(A.sum(0), 1) and A.min() >= 0
    assert check_combination_matrix(A, need_self_weights=True) < 1


def test_user_edges_and_relabelled_graphs():
    g = graph_from_edges(4, [[0, 1], [1, 2], [2, 3]])
    A = combination_matrix(g)
    assert check_combination_matrix(A) < 1
    h = nx.relabel_nodes(nx.path_graph(3), {0: 10, 1: 20, 2: 30})
    assert combination_matrix(h).shape == (3, 3)
    with pytest.raises(ConfigError, match=r"topology.edges\[0\] must be an integer in"):
        graph_from_edges(3, [[0, 5]])


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (np.array([[0.5, 0.5], [0.4, 0.6]]), "symmetric"),
        (np.array([[0.6, 0.5], [0.5, 0.6]]), "doubly stochastic"),
        (np.array([[1.2, -0.2], [-0.2, 1.2]]), r"entries must be in \[0, 1\]"),
        (np.eye(3), "connected"),
        (np.ones((2, 3)) / 2, "square"),
        (np.array([[np.nan, 1], [1, 0]]), "finite"),
    ],
)
def test_invalid_matrices_are_rejected_with_the_reason(matrix, message):
    with pytest.raises(ConfigError, match=message):
        check_combination_matrix(matrix)


def test_zero_self_weight_rejected_only_for_graph_homomorphic():
    A = np.array([[0.0, 0.5, 0.5], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5]])
    assert check_combination_matrix(A) < 1
    with pytest.raises(ConfigError, match="a_pp > 0 .* p=0"):
        check_combination_matrix(A, need_self_weights=True)


def test_disconnected_random_graph_reports_how_to_fix():
    with pytest.raises(ConfigError, match="raise topology.probability"):
        build_graph("erdos_renyi", 30, rng=np.random.default_rng(0), probability=0.01)
