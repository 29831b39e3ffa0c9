"""One-vs-one pairs side by side in one process (psvm.svc.pairs): the same model and
statistics as one by one, errors in pair order, the others stopped."""

import math
import threading
from contextlib import closing
from types import SimpleNamespace

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits

import psvm
from psvm._params import make_svc_config, validate_svc_params
from psvm.comm import Comm
from psvm.kernels import csr_arrays
from psvm.stats import Stats
from psvm.svc import pairs
from psvm.svc.pairs import pair_workers, solved_pairs
from psvm.svc.problem import BinaryProblem
from psvm.svc.solver import Cancelled, Solver


def _digits():
    X, y = load_digits(return_X_y=True)
    return X[:600] / 16, y[:600]


CASES = {
    "rbf": (psvm.SVC, {}),
    "poly, C = 10": (psvm.SVC, {"kernel": "poly", "C": 10.0}),
    "balanced": (psvm.SVC, {"class_weight": "balanced"}),
    "nu": (psvm.NuSVC, {"nu": 0.05}),
    "precomputed": (psvm.SVC, {"kernel": "precomputed"}),
    "probability": (psvm.SVC, {"probability": True, "random_state": 0}),
}


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="numba's pool has one thread")
@pytest.mark.parametrize("case", CASES)
@pytest.mark.filterwarnings("ignore:.*probability:FutureWarning")
def test_pairs_on_threads_give_the_one_by_one_model_bits_and_statistics(case, monkeypatch):
    monkeypatch.setattr(pairs, "PAIR_SECONDS", 0.0)  # threads whatever the first pair's time
    numba.get_num_threads()  # (starts numba's threads: the layer is known then)
    if numba.threading_layer() not in pairs.THREADSAFE_LAYERS:
        pytest.skip(f"numba's {numba.threading_layer()} layer: the pairs run one by one")
    make, params = CASES[case]
    X, y = _digits()
    if params.get("kernel") == "precomputed":
        X = X @ X.T
    one = make(n_threads=1, **params).fit(X, y)
    two = make(n_threads=2, **params).fit(X, y)
    assert "pair_threads" not in one.fit_stats_["values"]
    assert two.fit_stats_["values"]["pair_threads"] == 2
    names = ("dual_coef_", "intercept_", "support_", "n_support_", "n_iter_")
    if params.get("probability"):
        names += ("probA_", "probB_")
    for name in names:
        np.testing.assert_array_equal(getattr(two, name), getattr(one, name), err_msg=name)
    assert two.fit_stats_["counts"] == one.fit_stats_["counts"]
    for name in ("iter", "gap", "active", "cache_misses"):  # in pair order, as one by one
        assert two.fit_stats_["traces"][name] == one.fit_stats_["traces"][name], name


def test_pairs_run_one_by_one_where_threads_cannot_serve(monkeypatch):
    comm = Comm()
    budget = min(numba.get_num_threads(), 45)
    layer = numba.threading_layer()
    assert pair_workers(comm, None, 45) == (budget if layer in pairs.THREADSAFE_LAYERS else 1)
    assert pair_workers(comm, object(), 45) == 1  # a checkpoint saves one pair at a time
    assert pair_workers(comm, None, 1) == 1
    assert pair_workers(SimpleNamespace(size=2), None, 45) == 1  # ranks step through pairs
    monkeypatch.setattr(pairs.numba, "threading_layer", lambda: "workqueue")
    assert pair_workers(comm, None, 45) == 1  # two threads' parallel regions would abort
    # a first pair faster than PAIR_SECONDS: the others one by one too, in this thread
    monkeypatch.setattr(pairs, "PAIR_SECONDS", math.inf)
    threads, stats = [], Stats()

    def solve(pair, problem, stats, cancel, workers):
        threads.append((threading.current_thread(), cancel, workers))
        return pair

    got = list(solved_pairs(5, lambda pair: (pair,), solve, stats, 2))
    assert [res for _, _, res in got] == list(range(5)) and "pair_threads" not in stats.values
    assert threads == [(threading.current_thread(), None, 1)] * 5


def test_the_first_error_in_pair_order_is_raised_and_the_other_pairs_stop(monkeypatch):
    """Pair 2 fails first, then pair 1: pair 1's error is raised, as one by one. Pair 3 runs
    until it is told to stop; no pair past the 2 x 2 prepared ahead is prepared."""
    monkeypatch.setattr(pairs, "PAIR_SECONDS", 0.0)
    prepared, cancels, waited = [], [], []
    three_started = threading.Event()  # (after pair 2 failed: pair 2's thread runs it)

    def prepare(pair):
        prepared.append(pair)
        return (pair,)

    def solve(pair, problem, stats, cancel, workers):
        if pair:  # (the first pair is solved alone, in this thread)
            cancels.append(cancel)
        if pair == 1:
            assert three_started.wait(10)
            raise ValueError("pair 1")
        if pair == 2:
            raise RuntimeError("pair 2")
        if pair >= 3:
            three_started.set()
            waited.append(cancel.wait(10))
            raise Cancelled
        stats.add("n_iter", 1)
        return pair

    stats = Stats()
    got = []
    with pytest.raises(ValueError, match="pair 1"):
        with closing(solved_pairs(20, prepare, solve, stats, 2)) as solved:
            for pair, job, res in solved:
                got.append((pair, job, res))
    assert got == [(0, (0,), 0)] and stats.counts["n_iter"] == 1
    assert stats.values["pair_threads"] == 2
    assert all(c is cancels[0] and c.is_set() for c in cancels)
    assert waited and all(waited)  # the pairs running then stopped when told
    assert prepared == [0, 1, 2, 3, 4]


def test_an_error_of_the_caller_stops_the_pairs_when_it_closes_them(monkeypatch):
    """Ctrl-C while fit_ovo adds a result: closing the generator (``contextlib.closing``)
    stops the pair running and drops those not started."""
    monkeypatch.setattr(pairs, "PAIR_SECONDS", 0.0)
    started, waited = threading.Event(), []

    def solve(pair, problem, stats, cancel, workers):
        if pair >= 2:
            started.set()
            waited.append(cancel.wait(10))
            raise Cancelled
        return pair

    with pytest.raises(KeyboardInterrupt):
        with closing(solved_pairs(9, lambda pair: (pair,), solve, Stats(), 2)) as solved:
            for pair, _, _ in solved:
                if pair == 1:
                    assert started.wait(10)
                    raise KeyboardInterrupt
    assert waited and all(waited) and len(waited) <= 3  # of pairs 2-4, those that started


def test_a_cancelled_solver_stops_at_its_next_engine_call():
    X, y = _digits()
    keep = np.isin(y, (0, 1))
    Xc, yb = sp.csr_matrix(X[keep]), np.where(y[keep] == 0, 1.0, -1.0)
    cfg = make_svc_config(validate_svc_params(), Xc.shape[1], float(Xc.toarray().var()))
    width = int(np.diff(Xc.indptr).max())
    problem = BinaryProblem(csr_arrays(Xc), Xc.shape[1], yb, np.ones(yb.size), 0, yb.size, width)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        Solver(Comm(), problem, cfg, Stats(), cancel=cancel).solve()
