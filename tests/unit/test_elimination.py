"""Elimination policies: their schedules and decisions, and exactness after reconstruction."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import svm

from psvm._params import HEURISTICS, KERNELS, ParameterError, make_svc_config, validate_svc_params
from psvm.comm import Comm
from psvm.kernels import csr_arrays, kernel_matrix
from psvm.stats import Stats
from psvm.svc import solver as solver_module
from psvm.svc.elimination import POLICIES, make_policy
from psvm.svc.engine import eliminate
from psvm.svc.problem import BinaryProblem
from psvm.svc.solver import Solver
from tests._svm import fit_model, load_head, pair_objectives


def test_registry_is_the_parameter_table():
    assert tuple(POLICIES) == HEURISTICS and all(make_policy(h).name == h for h in HEURISTICS)
    with pytest.raises(ParameterError, match="heuristic"):
        validate_svc_params(heuristic="eager")
    with pytest.raises(ParameterError, match="reconstruction"):
        validate_svc_params(reconstruction="sometimes")


def test_regressors_reconstruct_at_several_gaps_by_default():
    """epsilon-SVR and nu-SVR default to 'multi' (a row eliminated by mistake and found at
    the end makes their long end game run again), on every face; an explicit value wins."""
    import psvm
    from psvm._params import SVM_TYPES
    from psvm.cli.train import svc_params

    for svm_type in SVM_TYPES:
        want = "multi" if svm_type in ("epsilon_svr", "nu_svr") else "single"
        assert validate_svc_params(svm_type=svm_type)["reconstruction"] == want
        assert svc_params({"svm_type": svm_type, "class_weight": {}})["reconstruction"] == want
    assert validate_svc_params(svm_type="nu_svr", reconstruction="single")["reconstruction"] == (
        "single"
    )
    assert psvm.SVR().reconstruction == psvm.NuSVR().reconstruction == "multi"
    assert psvm.SVC().reconstruction == psvm.OneClassSVM().reconstruction == "single"


@pytest.mark.parametrize(
    "name, n, expected",
    [
        ("none", 5000, []),
        ("earliest", 5000, list(range(1, 1001))),
        ("frequent", 5000, list(range(100, 1001, 50))),  # from iteration 300000 / n = 60
        ("frequent", 500, list(range(600, 1001, 50))),
        ("frequent", 100_000, list(range(50, 1001, 50))),
        ("frequent", 30, []),  # from iteration 1000 on
        ("percent-1", 5000, list(range(50, 1001, 50))),
        ("percent-5", 5000, [250, 500, 750, 1000]),
        ("percent-10", 5000, [500, 1000]),
        ("libsvm", 5000, [1000]),
        ("libsvm", 300, [300, 600, 900]),
        ("streak-3", 5000, [1000]),
    ],
)
def test_check_schedule(name, n, expected):
    p = make_policy(name)
    got = [k for k in range(1, 1001) if p.check_now(k, n, gap=1.0, gap0=1.0, tol=1e-3)]
    assert got == expected


def test_lazy_policies_wait_for_the_gap():
    gap_triggered, lazy = make_policy("gap-triggered"), make_policy("lazy")
    assert not gap_triggered.check_now(1000, 5000, gap=0.5, gap0=1.0, tol=1e-3)
    assert gap_triggered.check_now(1000, 5000, gap=0.05, gap0=1.0, tol=1e-3)
    assert not lazy.check_now(1000, 5000, gap=0.2, gap0=1.0, tol=1e-3)
    assert lazy.check_now(1000, 5000, gap=0.05, gap0=1.0, tol=1e-3)


def test_rule_eliminates_only_bound_non_violators():
    # rows: y, alpha, C, G ; m = 1, M = -1 (v = -y G)
    y = np.array([1.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0])
    alpha = np.array([0.0, 1.0, 0.0, 1.0, 0.5, 0.0, 1.0])
    C = np.ones(7)
    G = np.array([2.0, -2.0, -2.0, 2.0, 5.0, 0.0, 0.0])
    # v = [-2 (I_up only, < M: out), 2 (I_low only, > m: out), -2 (I_low only: stays),
    #      -2... computed below]
    v = -y * G
    act = np.ones(7, dtype=bool)
    act[0] = False  # an inactive row is left alone (the rule would select it)
    n_out = eliminate(y, alpha, C, G, act, 1.0, -1.0, 1.0, -1.0, np.zeros(7, np.int64), 1)
    up_only = ((y > 0) & (alpha <= 0)) | ((y < 0) & (alpha >= C))
    low_only = ((y < 0) & (alpha <= 0)) | ((y > 0) & (alpha >= C))
    rule = (up_only & (v < -1)) | (low_only & (v > 1))
    assert rule[0] and not rule[4]  # the free row 4 stays
    assert set(np.flatnonzero(~act)) == set(np.flatnonzero(rule)) and n_out == rule[1:].sum()


def test_nu_rule_tests_each_sign_against_its_own_extremes():
    """Solver_NU's be_shrunk: a row with y = -1 is tested against m_neg and M_neg only."""
    y = np.array([1.0, -1.0])
    alpha, C = np.zeros(2), np.ones(2)  # both at 0: y = +1 in I_up only, y = -1 in I_low only
    G = np.array([0.5, 0.5])  # v = -y G = [-0.5, 0.5]
    act = np.ones(2, dtype=bool)
    # with the +1 side's M = 0 row 0 goes (v < M); row 1 stays while 0.5 <= m_neg = 1
    assert eliminate(y, alpha, C, G, act, 2.0, 0.0, 1.0, -3.0, np.zeros(2, np.int64), 1) == 1
    assert list(act) == [False, True]
    act[:] = True  # with m_neg = 0.2 row 1 goes too (v > m_neg); the +1 extremes keep row 0
    assert eliminate(y, alpha, C, G, act, 2.0, -3.0, 0.2, -3.0, np.zeros(2, np.int64), 1) == 1
    assert list(act) == [True, False]


def test_streak_needs_consecutive_hits():
    y, alpha, C, G = np.ones(1), np.zeros(1), np.ones(1), np.array([2.0])
    act, streak = np.ones(1, dtype=bool), np.zeros(1, np.int64)
    assert eliminate(y, alpha, C, G, act, 1.0, -1.0, 1.0, -1.0, streak, 3) == 0
    assert eliminate(y, alpha, C, G, act, 1.0, -1.0, 1.0, -1.0, streak, 3) == 0
    G[0] = -5.0  # the rule fails once: the streak restarts
    assert eliminate(y, alpha, C, G, act, 1.0, -1.0, 1.0, -1.0, streak, 3) == 0
    G[0] = 2.0
    for _ in range(2):
        assert eliminate(y, alpha, C, G, act, 1.0, -1.0, 1.0, -1.0, streak, 3) == 0
    assert act[0]
    assert eliminate(y, alpha, C, G, act, 1.0, -1.0, 1.0, -1.0, streak, 3) == 1 and not act[0]


SETS = {"a9a": ("a9a.xz", "a9a.t.xz", 1.0, 0.05, 123),
        "w8a": ("w8a.xz", "w8a.t.xz", 1.0, 0.05, 300),
        "ijcnn1": ("ijcnn1.xz", "ijcnn1.t.xz", 1.0, 1.0, 22)}  # fmt: skip


@pytest.fixture(scope="module", params=sorted(SETS))
def reference(request, shared_data):
    train, test, C, gamma, nf = SETS[request.param]
    X, y = load_head(shared_data / train, 2500, n_features=nf)
    Xt, _ = load_head(shared_data / test, 3000, n_features=nf)
    ref = svm.SVC(C=C, gamma=gamma).fit(X, y)
    none, _ = fit_model(X, y, C=C, gamma=gamma, heuristic="none")
    return X, y, Xt, C, gamma, ref, none


@pytest.mark.parametrize("reconstruction", ["single", "multi"])
def test_every_heuristic_is_exact(reference, reconstruction):
    X, y, Xt, C, gamma, ref, none = reference
    ref_obj = pair_objectives(ref.dual_coef_, ref.support_vectors_, ref.n_support_, "rbf", gamma)
    ref_pred = ref.predict(Xt)
    for h in HEURISTICS:
        model, stats = fit_model(X, y, C=C, gamma=gamma, heuristic=h, reconstruction=reconstruction)
        obj = model.meta["objective"][0]
        assert obj == pytest.approx(none.meta["objective"][0], rel=1e-3), h
        assert obj == pytest.approx(ref_obj[0], rel=1e-3), h
        assert np.mean(model.predict(Xt) == ref_pred) >= 0.999, h
        assert not model.meta["approximate"]


def _gradient(X, y, alpha, gamma):
    """G = Q alpha - 1, recomputed from scratch."""
    K = kernel_matrix(sp.csr_matrix(X), sp.csr_matrix(X), KERNELS["rbf"], gamma, 0.0, 3)
    return (np.outer(y, y) * K) @ alpha - 1.0


def _full_gap(X, y, alpha, C, gamma):
    """m - M over all rows, from the gradient recomputed from scratch."""
    v = -y * _gradient(X, y, alpha, gamma)
    up = ((y > 0) & (alpha < C)) | ((y < 0) & (alpha > 0))
    low = ((y < 0) & (alpha < C)) | ((y > 0) & (alpha > 0))
    return v[up].max() - v[low].min()


def _heart(shared_data):
    X, y = load_head(shared_data / "heart_scale.xz")
    return X, np.where(y > 0, 1.0, -1.0)


def _solver(X, y, n_features, **params):
    """A one-process solver for the binary problem (X, y), its statistics and its config."""
    cfg = make_svc_config(validate_svc_params(**params), n_features, 0)
    stats = Stats()
    problem = BinaryProblem(
        csr_arrays(X),
        X.shape[1],
        y,
        np.full(y.size, cfg.C),
        0,
        y.size,
        int(np.diff(X.indptr).max()),
    )
    return Solver(Comm(), problem, cfg, stats), stats, cfg


def test_false_positives_are_found_and_repaired(shared_data):
    X, y = _heart(shared_data)
    C, gamma = 100.0, 0.05
    solver, stats, cfg = _solver(X, y, 13, C=C, gamma=gamma, heuristic="earliest")
    res = solver.solve()
    assert stats.counts["n_eliminated"] > 0
    assert stats.counts["n_false_positive"] > 0
    assert stats.counts["n_reconstruct"] > 0 and stats.seconds["reconstruct"] > 0
    assert stats.counts["n_relayout"] > 0 and stats.seconds["cut"] > 0  # a cut is timed
    assert _full_gap(X, y, res.alpha, C, gamma) < cfg.tol * 1.01
    ref, _ = fit_model(X, y, C=C, gamma=gamma, heuristic="none")
    assert res.objective == pytest.approx(ref.meta["objective"][0], rel=1e-6)


@pytest.mark.parametrize("max_departures", [16, 2])
def test_stale_gradients_are_brought_up_to_date(shared_data, monkeypatch, max_departures):
    """After several window cuts and max_iter, the stale rows' G is exact: brought up to date
    at max_iter (as LIBSVM reconstructs there), through ``max_departures`` snapshots.

    ``max_departures`` 2 also refreshes at the third cut (the memory bound's path).
    """
    monkeypatch.setattr(solver_module, "MAX_DEPARTURES", max_departures)
    X, y = _heart(shared_data)
    solver, stats, _ = _solver(X, y, 13, C=100.0, gamma=0.05, heuristic="earliest", max_iter=400)
    assert solver.solve().status == 1  # stopped at max_iter, with stale rows
    G = _gradient(X, y, solver.alpha, 0.05)
    stale = ~solver.in_window
    assert stats.counts["n_relayout"] >= 3 and stale.sum() > 100
    np.testing.assert_allclose(solver.G, G, rtol=0, atol=1e-10)
    assert len(solver.departures) == 1  # one snapshot: the state at the refresh


def test_approximate_libsvm_runs_to_the_tolerance(shared_data):
    """Without reconstruction there is no unshrink point: the active problem is solved to tol."""
    X, y = load_head(shared_data / "a9a.xz", 3000, n_features=123)
    solver, stats, _ = _solver(
        X, y, 123, C=1.0, gamma=0.05, heuristic="libsvm", reconstruction="approximate"
    )
    res = solver.solve()
    assert stats.counts["n_eliminated"] > 0 and res.approximate
    assert res.gap < 1e-3


def test_approximate_is_flagged(shared_data, tmp_path):
    from psvm.io.model_file import read_model, write_model

    X, y = load_head(shared_data / "heart_scale.xz")
    model, stats = fit_model(
        X, y, C=1000.0, gamma=0.5, heuristic="earliest", reconstruction="approximate"
    )
    assert stats.counts["n_eliminated"] > 0 and stats.counts.get("n_reconstruct", 0) == 0
    assert model.meta["approximate"] is True
    write_model(tmp_path / "m", model)
    assert read_model(tmp_path / "m").meta["approximate"] is True


def test_max_iter_rebuilds_stale_gradients_for_the_objective(shared_data):
    """Stopped by max_iter with rows eliminated, rho and the objective still come from exact
    gradients (LIBSVM reconstructs at its iteration limit)."""
    X, y = load_head(shared_data / "a9a.xz", 3000)
    y = np.where(y > 0, 1.0, -1.0)
    model, stats = fit_model(X, y, C=1.0, gamma=0.05, heuristic="earliest", max_iter=1000)
    assert model.meta["status"] == 1 and stats.counts["n_eliminated"] > 0
    true = pair_objectives(model.dual_coef, model.support_vectors, model.n_support, "rbf", 0.05)
    assert model.meta["objective"][0] == pytest.approx(true[0], rel=1e-9)


def test_engine_call_returns_budget_when_its_iterations_are_spent(shared_data):
    """The budget event lets the solver grow the next call's budget (and stay responsive)."""
    from psvm.svc import engine as E

    X, y = _heart(shared_data)
    solver, _, _ = _solver(X, y, 13, C=100.0, gamma=0.05)
    solver.ctl_i[E.ITER_BUDGET] = 5
    solver._t_start = solver._last_progress = 0.0
    assert solver._run() == E.BUDGET and solver.ctl_i[E.N_ITER] == 5
