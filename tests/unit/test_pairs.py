"""One-vs-one pairs side by side in one process (psvm.svc.pairs): the same model and
statistics as one by one, errors in pair order, the others stopped."""

import math
import pickle
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
from psvm.svc import multiclass, pairs
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
    # probability's pairs: platt.py imports solved_pairs at each call, multiclass.py once
    assert multiclass.solved_pairs is pairs.solved_pairs
    platt, solved = [], pairs.solved_pairs

    def spy(n_pairs, prepare, solve, stats, workers):
        platt.append(workers)
        return solved(n_pairs, prepare, solve, stats, workers)

    monkeypatch.setattr(pairs, "solved_pairs", spy)
    one = make(n_threads=1, **params).fit(X, y)
    two = make(n_threads=2, **params).fit(X, y)
    assert platt == ([1, 2] if params.get("probability") else [])
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

    got = list(solved_pairs(5, lambda pair: pair, solve, stats, 2))
    assert got == [(pair, pair) for pair in range(5)] and "pair_threads" not in stats.values
    assert threads == [(threading.current_thread(), None, 1)] * 5


def test_the_first_error_in_pair_order_is_raised_and_the_other_pairs_stop(monkeypatch):
    """Pair 2 fails first, then pair 1: pair 1's error is raised, as one by one. Pair 3 runs
    until it is told to stop; no pair past the 2 x 2 prepared ahead is prepared."""
    monkeypatch.setattr(pairs, "PAIR_SECONDS", 0.0)
    prepared, cancels, waited = [], [], []
    three_started = threading.Event()  # (after pair 2 failed: pair 2's thread runs it)

    def prepare(pair):
        prepared.append(pair)
        return pair

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
            for pair, res in solved:
                got.append((pair, res))
    assert got == [(0, 0)] and stats.counts["n_iter"] == 1
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
        with closing(solved_pairs(9, lambda pair: pair, solve, Stats(), 2)) as solved:
            for pair, _ in solved:
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


class _Ranks(SimpleNamespace):
    """A stub communicator of ``size`` ranks on one node, rank 0's view."""

    def __init__(self, size: int):
        super().__init__(size=size, rank=0)

    def sum_(self, x):
        return x * self.size

    def local_size(self) -> int:
        return self.size


def _shard(n: int = 100):
    X = sp.random(n, 5, density=0.5, format="csr", random_state=0)
    return SimpleNamespace(X=X, n_local=n)


def test_pairs_are_dealt_longest_first_to_the_least_loaded_rank():
    # costs 49, 64, 36, 25 (rows squared): 8 -> rank 0, 7 -> 1, 6 -> 1, 5 -> 0
    owner = pairs.deal(_Ranks(2), np.array([7, 8, 6, 5]), _shard())
    assert owner.tolist() == [1, 0, 1, 0]
    assert pairs.deal(_Ranks(2), np.array([3, 3, 3, 3]), _shard()).tolist() == [0, 1, 0, 1]
    assert pairs.deal(_Ranks(3), np.array([3, 3, 3]), _shard()).tolist() == [0, 1, 2]  # ties


def test_pairs_are_solved_together_where_dealing_would_not_pay(monkeypatch):
    assert pairs.deal(Comm(), np.array([5, 5, 5]), _shard()) is None  # one process
    assert pairs.deal(_Ranks(2), np.array([10]), _shard()) is None  # one pair
    # three equal pairs keep 3 ranks busy all the time (dealt), 2 ranks 75% and 4 ranks 75%
    # of it: under DEAL_SHARE
    assert pairs.deal(_Ranks(2), np.array([5, 5, 5]), _shard()) is None
    assert pairs.deal(_Ranks(4), np.array([5, 5, 5]), _shard()) is None
    # one large pair and small ones: the busiest rank has most of the work
    assert pairs.deal(_Ranks(4), np.array([100, 10, 10, 10]), _shard()) is None
    # every rank of a node would hold all rows: only within REPLICATE_MAX_BYTES
    from psvm.io import shard

    monkeypatch.setattr(shard, "REPLICATE_MAX_BYTES", 0)
    assert pairs.deal(_Ranks(3), np.array([3, 3, 3]), _shard()) is None


def test_statistics_of_another_ranks_pair_count_once_over_the_ranks():
    part = Stats()
    part.add("n_iter", 7)  # kept alike by every rank (SHARED_COUNTS)
    part.add("cache_hits", 5)  # summed over the ranks
    part.seconds["kernel"] = 0.5
    part.traces["iter"] += [0, 10]
    part.traces["active"] += [40, 30]  # summed over the ranks (SUMMED_TRACES)
    mine, other = Stats(), Stats()
    mine.merge(part)
    other.merge(part, own=False)
    assert dict(mine.counts) == {"n_iter": 7, "cache_hits": 5} and mine.seconds["kernel"] == 0.5
    assert dict(other.counts) == {"n_iter": 7} and "kernel" not in other.seconds
    assert other.traces["iter"] == [0, 10] and other.traces["active"] == [0, 0]


def test_records_are_applied_in_order_when_times_or_traces_are_read():
    stats, applied = Stats(), []

    def record(k):
        def apply(seconds, traces):
            applied.append(k)
            seconds["kernel"] += k
            traces["iter"].append(k)

        return apply

    stats.later(record(1))
    stats.later(record(2))
    with stats.timer("cut"):  # a timer applies none
        pass
    assert applied == [] and "cut" in stats._seconds
    assert stats.traces["iter"] == [1, 2] and stats.seconds["kernel"] == 3 and applied == [1, 2]
    stats.later(record(3))
    mine = Stats()
    mine.merge(stats)  # a part's records, then the part: in order
    assert mine.traces["iter"] == [1, 2, 3] and applied == [1, 2, 3]
    stats.later(lambda seconds, traces: traces["iter"].append(5))  # (a lambda: no pickle)
    copy = pickle.loads(pickle.dumps(stats))  # the records applied first: plain values
    assert copy.traces["iter"] == [1, 2, 3, 5] and copy._later == [] == stats._later
    before = Stats.__new__(Stats)  # a pickle made before records: plain attributes
    before.__setstate__({"counts": {}, "seconds": {"kernel": 1.0}, "traces": {"iter": [4]}})
    assert before.seconds == {"kernel": 1.0} and before.traces == {"iter": [4]}


class _Sent(Exception):
    """Stops a stub rank at its exchange, its part kept (:func:`_dealt`)."""


def _parts(owner, solve, shows=True, workers=2, live=None) -> list:
    """Each stub rank's part of dealt_pairs' exchange: its pairs solved, stopped there
    (``live``: rank 0's live log)."""
    parts = []

    def sent(obj):
        parts.append(obj)
        raise _Sent

    for rank in range(int(owner.max()) + 1):
        comm = SimpleNamespace(size=int(owner.max()) + 1, rank=rank, allgather_obj=sent)
        now = live if rank == 0 else None
        with pytest.raises(_Sent):
            list(pairs.dealt_pairs(comm, owner, lambda p: p, solve, Stats(), workers, shows, now))
    return parts


def _dealt(owner, solve, shows=True, workers=2, live=None) -> list:
    """Every stub rank's (yielded pairs, Stats) from dealt_pairs, given all ranks' parts."""
    parts, out = _parts(owner, solve, shows, workers, live), []
    for rank in range(len(parts)):
        comm = SimpleNamespace(size=len(parts), rank=rank, allgather_obj=lambda obj: parts)
        stats = Stats()
        got = list(pairs.dealt_pairs(comm, owner, lambda p: p, solve, stats, workers, shows))
        out.append((got, stats))
    return out


def test_rank_0_writes_its_dealt_pairs_progress_as_it_comes():
    """A long multi-class fit under mpiexec shows rank 0's pairs' progress lines while they
    run; the other ranks' come with the results, and the lines after each pair (LIBSVM's)
    stay in pair order."""
    owner, live = np.array([0, 1, 0, 1, 0]), []
    ranks = _dealt(owner, _solve(), workers=1, live=live.append)
    assert live == ["progress 0", "progress 2", "progress 4"]
    expected = [
        (p, (f"res {p}", ([f"progress {p}"] if p % 2 else []) + [f"after {p}"])) for p in range(5)
    ]
    assert all(got == expected for got, _ in ranks)


def _solve(fail=()):
    def solve(pair, problem, stats, cancel, workers, log=None):
        if pair in fail:
            from psvm.svc.training import TrainingError

            raise TrainingError(f"pair {pair}")
        stats.add("n_iter", 10 + pair)
        stats.add("cache_misses", pair)
        stats.traces["iter"] += [0, 5 + pair]
        stats.traces["active"] += [9, pair]
        if log is not None:
            log(f"progress {pair}")
        return f"res {pair}", [f"after {pair}"]

    return solve


def test_dealt_pairs_give_every_rank_every_result_and_one_process_statistics(monkeypatch):
    """Two stub ranks, pairs 0, 2, 4 on rank 0 (on two threads) and 1, 3 on rank 1: each rank
    yields every pair's result and lines in pair order, and their statistics reduce to those
    of one process solving every pair."""
    from psvm.stats import reduce_stats

    monkeypatch.setattr(pairs, "PAIR_SECONDS", 0.0)
    owner = np.array([0, 1, 0, 1, 0])
    ranks = _dealt(owner, _solve())
    expected = [(p, (f"res {p}", [f"progress {p}", f"after {p}"])) for p in range(5)]
    assert all(got == expected for got, _ in ranks)
    assert ranks[0][1].values == {"pairs_dealt": 2, "pair_threads": 2}
    one = Stats()
    assert len(list(solved_pairs(5, lambda p: p, _solve(), one, 1))) == 5
    views = [{**stats.to_dict(), "comm": {}} for _, stats in ranks]
    comm = SimpleNamespace(size=2, counters={}, allgather_obj=lambda _: views)
    two, alone = reduce_stats(comm, ranks[0][1]), reduce_stats(None, one)
    assert two["counts"] == alone["counts"] == {"n_iter": 60, "cache_misses": 10}
    assert two["traces"] == alone["traces"]
    assert [r["counts"]["cache_misses"] for r in two["per_rank"]] == [6, 4]  # each its own
    quiet = _dealt(owner, _solve(), shows=False, workers=1)
    assert all(got == [(p, (f"res {p}", [f"after {p}"])) for p in range(5)] for got, _ in quiet)


def test_dealt_pairs_raise_the_first_error_in_pair_order_on_every_rank():
    """Rank 0 fails at pair 4 (after 0 and 2), rank 1 at pair 1: both raise pair 1's."""
    owner, solve = np.array([0, 1, 0, 1, 0]), _solve({1, 4})
    parts = _parts(owner, solve, False, 1)
    assert [(sorted(own), err[0]) for own, err in parts] == [([0, 2], 4), ([], 1)]
    for rank in range(2):
        comm = SimpleNamespace(size=2, rank=rank, allgather_obj=lambda obj: parts)
        with pytest.raises(ValueError, match="pair 1"):
            list(pairs.dealt_pairs(comm, owner, lambda p: p, solve, Stats(), 1, False))
