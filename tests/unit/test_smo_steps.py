"""Selection and the two-variable step on tiny problems, against brute force."""

import numpy as np
import pytest
from numba import njit

from psvm.svc.packets import GIDX, KEY, ROW, winner
from psvm.svc.select import BLOCK, SUB, _block_max, argmax_first, bids, candidates, second_order
from psvm.svc.update import two_variable_step, update_gradient


def random_state(rng, n=30):
    y = rng.choice([-1.0, 1.0], n)
    C = np.full(n, 2.0)
    alpha = rng.choice([0.0, 2.0, 0.5, 1.3], n)
    G = rng.normal(size=n)
    return y, alpha, C, G


def select(y, alpha, C, G, act=None):
    act = np.ones(y.size, dtype=bool) if act is None else act
    return candidates(y, alpha, C, G, act, np.empty(y.size), np.empty(y.size))


@pytest.mark.parametrize("seed", range(5))
def test_candidates_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    y, alpha, C, G = random_state(rng)
    m, i, minus_M, j = select(y, alpha, C, G)
    up = ((y > 0) & (alpha < C)) | ((y < 0) & (alpha > 0))
    low = ((y < 0) & (alpha < C)) | ((y > 0) & (alpha > 0))
    v = -y * G
    assert m == v[up].max() and i == np.flatnonzero(up & (v == v[up].max()))[0]
    assert minus_M == (-v)[low].max() and j == np.flatnonzero(low & (-v == (-v)[low].max()))[0]
    act = np.ones(y.size, dtype=bool)
    act[i] = act[j] = False  # inactive rows do not bid
    m2, i2, minus_M2, j2 = select(y, alpha, C, G, act)
    assert m2 == v[up & act].max() and i2 != i and j2 != j and minus_M2 == (-v)[low & act].max()


def test_ties_go_to_the_smallest_index():
    y = np.ones(4)
    m, i, _, _ = select(y, np.zeros(4), np.ones(4), -np.ones(4))
    assert (m, i) == (1.0, 0)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(
    "n, halves", [(30, 1), (SUB, 1), (SUB + 1, 1), (40, 2), (3 * BLOCK + 7, 1), (2 * BLOCK + 6, 2)]
)
def test_second_order_matches_brute_force(seed, n, halves):
    """Blocks, the scalar pass of small windows (up to SUB) and the two halves of an SVR
    window (one kernel value per row) pick the first smallest objective, as one pass over
    all positions would."""
    rng = np.random.default_rng(seed)
    y, alpha, C, G = random_state(rng, n)
    G = np.round(G, 1)  # ties between positions, across blocks too
    QD = rng.uniform(0.5, 1.5, y.size)
    K_row = rng.choice([-0.25, 0.0, 0.25], y.size // halves)
    K_i = np.tile(K_row, halves)
    m, i, _, _ = select(y, alpha, C, G)
    act = rng.random(y.size) < 0.9
    up, low = np.empty(y.size), np.empty(y.size)
    bids(y, alpha, C, G, act, up, low)
    obj, j = second_order(low, QD, K_row, m, QD[i], np.empty(y.size))
    in_low = ((y < 0) & (alpha < C)) | ((y > 0) & (alpha > 0))
    b = m + y * G
    ok = in_low & act & (b > 0)
    gains = np.where(ok, -(b**2) / (QD[i] + QD - 2 * K_i), np.inf)
    assert j == int(np.argmin(gains)) and obj == gains.min()


@njit
def _update(y, alpha, C, G, act, K_i, K_j, c_i, c_j, up, low, q_i, q_j):
    update_gradient(y, alpha, C, G, act, K_i, K_j, c_i, c_j, up, low, q_i, q_j)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("halves", [1, 2])
def test_update_gives_the_bids_of_a_full_pass(seed, halves):
    """The update keeps every row's sets from its old bids and bids the rows whose alpha
    changed anew (q = -1: another rank's): the bids a full pass gives on the new state, on
    a window of one variable per row and of two (SVR's halves reading one column)."""
    rng = np.random.default_rng(seed)
    n = 40 * halves
    y, alpha, C, G = random_state(rng, n)
    act = rng.random(n) < 0.8
    up, low = np.empty(n), np.empty(n)
    bids(y, alpha, C, G, act, up, low)
    q_i, q_j = rng.choice(n, 2, replace=False)
    q_j = q_j if seed % 2 else -1
    for q in (q_i, q_j):
        if q >= 0:
            alpha[q] = rng.choice([0.0, C[q], 0.7 * C[q]])
    K_i, K_j = rng.normal(size=(2, n // halves))
    expected_G = G + y * (0.3 * np.tile(K_i, halves) - 0.2 * np.tile(K_j, halves))
    _update(y, alpha, C, G, act, K_i, K_j, 0.3, -0.2, up, low, q_i, q_j)
    assert np.array_equal(G, expected_G)
    full_up, full_low = np.empty(n), np.empty(n)
    bids(y, alpha, C, G, act, full_up, full_low)
    assert np.array_equal(up, full_up) and np.array_equal(low, full_low)


def test_argmax_first_takes_the_first_maximum():
    """Also the vectorised block maximum (LLVM's maxnum) against numpy's."""
    rng = np.random.default_rng(0)
    for n in (1, 7, 63, 64, 3 * SUB + 5, BLOCK - 1, BLOCK, BLOCK + 1, 5 * BLOCK + 3):
        for _ in range(20):
            a = rng.integers(-2, 3, n).astype(float)
            a[rng.random(n) < 0.3] = -np.inf
            assert argmax_first(a, 1.0) == int(np.argmax(a))
            assert argmax_first(-a, -1.0) == int(np.argmax(a))
            assert _block_max(a, 1.0) == a.max() and _block_max(-a, -1.0) == a.max()
        assert argmax_first(np.full(n, -np.inf), 1.0) == 0
    assert _block_max(np.empty(0), 1.0) == -np.inf


@pytest.mark.parametrize("seed", range(20))
def test_step_minimises_the_two_variable_problem(seed):
    rng = np.random.default_rng(seed)
    y_i, y_j = rng.choice([-1.0, 1.0], 2)
    C_i, C_j = rng.uniform(0.5, 2, 2)
    a_i, a_j = rng.uniform(0, C_i), rng.uniform(0, C_j)
    K = np.array([[1.0, rng.uniform(-0.9, 0.9)], [0, 1.0]])
    K[1, 0] = K[0, 1]
    G_i, G_j = rng.normal(size=2)
    new_i, new_j = two_variable_step(y_i, y_j, a_i, a_j, G_i, G_j, C_i, C_j, 1.0, 1.0, K[0, 1])
    assert 0 <= new_i <= C_i and 0 <= new_j <= C_j
    assert y_i * new_i + y_j * new_j == pytest.approx(y_i * a_i + y_j * a_j)
    Q = np.outer([y_i, y_j], [y_i, y_j]) * K

    def f(b_i, b_j):  # the dual restricted to the pair, relative to the old point
        d = np.array([b_i - a_i, b_j - a_j])
        return 0.5 * d @ Q @ d + np.array([G_i, G_j]) @ d

    # brute force along the feasible segment
    s = y_i * a_i + y_j * a_j
    grid = np.linspace(0, C_i, 20001)
    gj = (s - y_i * grid) * y_j
    feasible = (gj >= 0) & (gj <= C_j)
    best = min(f(b, c) for b, c in zip(grid[feasible], gj[feasible], strict=True))
    assert f(new_i, new_j) <= best + 1e-7


def test_the_winning_rank_is_the_best_key_then_the_smallest_global_index():
    """Every rank picks the same winner from the gathered packets, whatever P."""
    recv = np.zeros((4, 2 * (ROW + 2)))
    for r, (key, g) in enumerate([(1.0, 7), (3.0, 9), (3.0, 4), (0.5, -1)]):
        recv[r, KEY], recv[r, GIDX] = key, g  # rank 3 has no candidate (index -1)
        recv[r, ROW + 2 + KEY], recv[r, ROW + 2 + GIDX] = -key, g
    assert winner(recv, 0, True) == 2  # keys 3.0 tie: global index 4 < 9
    assert winner(recv, ROW + 2, False) == 2  # minimising: the same tie on -3.0
    recv[:, GIDX] = -1
    assert winner(recv, 0, True) == -1


def test_one_pass_helpers_match_their_numpy_forms():
    """The compiled one-pass forms of whole-shard sums: the bits of the numpy expressions
    they replace (gamma='scale', the used columns, rho's bounds and free terms)."""
    import scipy.sparse as sp

    from psvm.comm import Comm
    from psvm.kernels import csr_arrays, restrict_columns
    from psvm.svc.state import bias_terms, compact_features, row_sums, used_columns

    rng = np.random.default_rng(3)
    X = sp.random(300, 2000, density=0.02, format="csr", random_state=rng) * 1e3
    X.data[::7] *= -1e-5
    total, square = row_sums(*csr_arrays(X)[::2])
    row = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    for ours, weights in ((total, X.data), (square, X.data * X.data)):
        ref = np.bincount(row, weights=weights, minlength=X.shape[0])
        assert np.array_equal(ours.view(np.int64), ref.view(np.int64))
    used = np.unique(X.indices)
    assert used.size < X.shape[1]  # compact_features renumbers
    for n_columns in (X.shape[1], 10**8):  # counted, or sorted
        assert np.array_equal(used_columns(X.indices, n_columns), used)
    compact, ref = compact_features(Comm(), X), restrict_columns(X, used)
    assert compact.shape == ref.shape and (compact != ref).nnz == 0
    assert np.array_equal(compact.indices, ref.indices)
    # as wide as a file's index 2**31 - 1 allows: searched, not a lookup of 8 GiB
    import tracemalloc

    wide = sp.csr_matrix((X.data, X.indices * 1000, X.indptr), shape=(X.shape[0], 2**31 - 1))
    tracemalloc.start()
    compact = compact_features(Comm(), wide)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**24 and np.array_equal(compact.indices, ref.indices), peak

    n = 200
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    C = rng.choice([0.5, 1.0], n)
    alpha = np.select([rng.random(n) < 0.3, rng.random(n) < 0.5], [C, 0.0], rng.random(n) * C)
    G = rng.normal(size=n)
    rows = np.flatnonzero(rng.random(n) < 0.8)
    free = np.full(rows.size, np.nan)
    ub, lb, k = bias_terms(rows, y, alpha, C, G, free)
    free = free[:k]
    a, c, yg = alpha[rows], C[rows], y[rows] * G[rows]
    upper = ((a >= c) & (y[rows] < 0)) | ((a <= 0) & (y[rows] > 0))
    lower = ((a >= c) & (y[rows] > 0)) | ((a <= 0) & (y[rows] < 0))
    assert ub == yg[upper].min() and lb == yg[lower].max()
    assert np.array_equal(free, yg[(a > 0) & (a < c)])
