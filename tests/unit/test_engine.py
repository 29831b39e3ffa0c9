"""The compiled loop's parts: its exp, its cache against an LRU model, one specialisation."""

import itertools
import warnings
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning

import psvm
from psvm.comm.compiled import allgather
from psvm.kernels import RBF, exp, from_pre
from psvm.svc import engine, engine_nu, serial
from psvm.svc.cache import ColumnCache
from psvm.svc.elimination import ALWAYS, GAP_FRACTION, NEVER


def test_exp_is_within_one_ulp_and_the_same_in_any_position():
    x = np.concatenate([-np.geomspace(1e-12, 700, 5000), np.linspace(-5, 5, 1001)])
    got = from_pre(RBF, x.copy())
    ulps = np.abs(got.view(np.int64) - np.exp(x).view(np.int64))
    assert ulps.max() <= 1
    # vectorised loop and scalar remainder give the same bits: shift the buffer by one
    shifted = from_pre(RBF, np.concatenate([[0.0], x]))[1:]
    assert np.array_equal(shifted.view(np.int64), got.view(np.int64))
    assert all(engine._from_pre1(RBF, v) == g for v, g in zip(x[::97], got[::97], strict=True))
    assert exp(-1000.0) == 0.0 and np.isfinite(exp(1000.0))


def test_one_process_allgather_copies():
    send, recv = np.arange(5.0), np.zeros((1, 5))
    assert allgather((0, 0, 0, 1), send, recv) == 0
    assert np.array_equal(recv[0], send)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=300), st.integers(2, 9))
def test_cache_is_an_lru(keys, slots):
    """Hits, misses and evictions match an OrderedDict LRU of ``slots`` columns."""
    cache = ColumnCache(n_local=10, n_global=100, cache_mb=slots * 10 * 8 / 2**20)
    model: OrderedDict[int, None] = OrderedDict()
    for g in keys:
        col, hit, _ = cache.get(g)
        assert hit == (g in model)
        if hit:
            model.move_to_end(g)
            assert (col == g).all()  # the column it was filled with
        else:
            col[:] = g
            model[g] = None
            if len(model) > slots:
                model.popitem(last=False)
    assert cache.n_columns == len(model)


def test_the_loop_compiles_once():
    """Every kernel and selection shares one specialisation of the loop (fast start-up)."""
    X, y = load_iris(return_X_y=True)
    for kw in ({}, {"kernel": "poly", "degree": 2}, {"kernel": "linear", "selection": "first"}):
        psvm.SVC(**kw).fit(X, y)
    psvm.SVC(heuristic="earliest").fit(X[:, :2].copy(), y)  # sparse-like narrow data too
    assert len(serial.run_serial.signatures) == 1  # (one process: the loop without packets)


@pytest.mark.parametrize(
    "params",
    [
        {"kernel": "poly", "gamma": 1.0},  # window cuts, eliminations, a reconstruction
        {"kernel": "poly", "gamma": 1.0, "selection": "first", "heuristic": "earliest"},
        {"kernel": "poly", "gamma": 1.0, "selection": "first"},  # plain runs between tests
        {"kernel": "poly", "gamma": 1.0, "max_iter": 700, "heuristic": "libsvm"},
        {"C": 100.0, "gamma": 5.0, "reconstruction": "multi", "cache_size": 0.001},  # misses
    ],
)
def test_one_process_loop_gives_the_packet_loop_bits(monkeypatch, params):
    """run_serial (one process) makes the iterations of run (packets, any P) bit for bit."""
    X, y = load_iris(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # (max_iter)
        alone = psvm.SVC(**params).fit(X, y)
        monkeypatch.setattr(serial, "run_serial", engine.run)
        packets = psvm.SVC(**params).fit(X, y)
    for name in ("dual_coef_", "intercept_", "support_", "n_iter_"):
        assert np.array_equal(getattr(alone, name), getattr(packets, name)), name
    assert alone.fit_stats_["counts"] == packets.fit_stats_["counts"]  # misses, eliminations
    for name in ("iter", "gap", "active", "cache_misses"):
        assert alone.fit_stats_["traces"][name] == packets.fit_stats_["traces"][name], name


@pytest.mark.parametrize(
    "params",
    [
        {"kernel": "poly", "gamma": 1.0},  # cuts down to windows of 10 rows, reconstructions
        {"kernel": "poly", "gamma": 1.0, "selection": "first", "heuristic": "earliest"},
        {"kernel": "poly", "gamma": 1.0, "selection": "first"},
        {"kernel": "poly", "gamma": 1.0, "epsilon": 0.1, "svr": True},  # two variables a row
        {"C": 100.0, "gamma": 5.0, "cache_size": 0.001},  # two columns fit a pair's window
    ],
)
def test_small_windows_read_their_columns_from_a_block_with_the_caches_bits(monkeypatch, params):
    """One process reads a window of at most BLOCK_ROWS rows from a block of its columns, and
    runs its plain iterations in a loop of their own (serial._quiet): the same model,
    iterations, counts of hits and misses, and traces as the cache and the full loop alone."""
    from psvm.svc import solver

    X, y = load_iris(return_X_y=True)
    svr = params.pop("svr", False)
    make = psvm.SVR if svr else psvm.SVC
    target = X[:, 0] if svr else y
    X = X[:, 1:] if svr else X
    flags = []  # each window's: which rows of its block were filled
    real = solver.Solver._block

    def recorded(self, n):
        block = real(self, n)
        flags.append(block[1])
        return block

    monkeypatch.setattr(solver.Solver, "_block", recorded)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        blocks = make(**params).fit(X, target)
        used = sum(int(f.any()) for f in flags)  # windows whose loop read a block
        n_windows = len(flags)
        monkeypatch.setattr(solver, "BLOCK_ROWS", 0)
        cache = make(**params).fit(X, target)
    assert (used > 0) == ("cache_size" not in params), used  # (a cache that would evict: none)
    assert not any(f.size for f in flags[n_windows:])
    for name in ("dual_coef_", "intercept_", "support_", "n_iter_"):
        assert np.array_equal(getattr(blocks, name), getattr(cache, name)), name
    assert blocks.fit_stats_["counts"] == cache.fit_stats_["counts"]
    for name in ("iter", "gap", "active", "cache_misses"):
        assert blocks.fit_stats_["traces"][name] == cache.fit_stats_["traces"][name], name


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(0, 3000),
    since=st.integers(0, 500),
    budget=st.integers(1, 400),
    max_iter=st.integers(1, 4000),
    trace=st.integers(1, 300),
    ready=st.sampled_from([NEVER, ALWAYS, GAP_FRACTION]),
    start=st.integers(0, 2000),
    period=st.integers(1, 120),
    ck=st.integers(0, 300),
)
def test_plain_runs_end_at_the_first_iteration_that_may_need_more(
    n, since, budget, max_iter, trace, ready, start, period, ck
):
    """serial._plain_until: no iteration before it is timed, a trace sample, an elimination
    test, a checkpoint, at the iteration limit or past the budget, and it is one of those."""
    ci = np.zeros(engine.N_CTL_I, dtype=np.int64)
    ci[engine.N_ITER], ci[engine.ITER_BUDGET], ci[engine.MAX_ITER_] = n, budget, max_iter
    ci[engine.TRACE_EVERY], ci[engine.READY], ci[engine.START] = trace, ready, start
    ci[engine.PERIOD], ci[engine.CK_ITERS] = period, ck
    entry = max(n - since, 0)

    def needs_more(k):
        return (
            k % engine.TIMED_EVERY == 0
            or k % trace == 0
            or (ready != NEVER and k >= start and k % period == 0)
            or (ck > 0 and k % ck == 0)
            or k >= max_iter
            or k - entry >= budget
        )

    until = serial._plain_until(ci, entry)
    assert not any(needs_more(k) for k in range(n, until))
    assert needs_more(max(until, n))


def test_small_windows_checkpoint_on_the_same_iterations(tmp_path, monkeypatch):
    """Checkpoints every k iterations fall on the same iterations whether a small window's
    plain iterations run in their own loop (a block) or not: the loop stops before each."""
    from psvm.svc import solver

    X, y = load_iris(return_X_y=True)
    kw = dict(kernel="poly", gamma=1.0, checkpoint_iters=997)
    blocks = psvm.SVC(**kw, checkpoint=tmp_path / "a.ckpt").fit(X, y)
    monkeypatch.setattr(solver, "BLOCK_ROWS", 0)
    cache = psvm.SVC(**kw, checkpoint=tmp_path / "b.ckpt").fit(X, y)
    assert blocks.fit_stats_["counts"]["n_checkpoint"] >= max(blocks.n_iter_) // 997
    assert blocks.fit_stats_["counts"] == cache.fit_stats_["counts"]
    assert np.array_equal(blocks.dual_coef_, cache.dual_coef_)


def test_budget_and_max_iter_events():
    X, y = load_iris(return_X_y=True)
    clf = psvm.SVC(kernel="poly", gamma=1.0, max_iter=500).fit(X, y)
    assert clf.fit_status_ == 1 and max(clf.n_iter_) == 500


def test_trace_is_bounded_and_thinned_on_a_power_of_two_stride():
    """54k iterations on one pair: the trace keeps at most TRACE_POINTS samples plus the
    final state, on multiples of one stride."""
    from psvm.svc.traces import TRACE_POINTS

    X, y = load_iris(return_X_y=True)
    keep = y > 0
    clf = psvm.SVC(kernel="poly", gamma=1, degree=3, coef0=0, heuristic="none")
    clf.fit(X[keep], y[keep])
    iters = np.array(clf.fit_stats_["traces"]["iter"])
    n_iter = int(clf.n_iter_[0])
    assert n_iter > 20 * TRACE_POINTS
    assert TRACE_POINTS // 2 < iters.size <= TRACE_POINTS + 1 and iters[-1] == n_iter
    stride = iters[1] - iters[0]
    assert np.all(np.diff(iters[:-1]) == stride) and np.all(iters[:-1] % stride == 0)


def test_the_budget_grows_only_after_a_call_that_used_it(monkeypatch):
    """An engine call that ended early (here at a window cut) must not double the budget: the
    budget bounds a call's time, and with it how soon the ranks see Ctrl-C."""
    from psvm.svc import solver

    calls = []

    def recorded(*args):
        ci = args[7]
        budget, entry = int(ci[engine.ITER_BUDGET]), int(ci[engine.N_ITER])
        event = real(*args)
        calls.append((budget, int(ci[engine.N_ITER]) - entry))
        return event

    real = serial.run_serial
    monkeypatch.setattr(serial, "run_serial", recorded)
    monkeypatch.setattr(solver, "CALL_SECONDS", 1e9)  # no call is slow: only use grows it
    monkeypatch.setattr(solver, "FIRST_CALL_ROWS", 0)  # the smallest first budget: many calls
    X, y = load_iris(return_X_y=True)
    keep = y > 0
    psvm.SVC(kernel="poly", gamma=1, degree=3, coef0=0).fit(X[keep], y[keep])
    used = [n >= budget for budget, n in calls[:-1]]
    assert any(used) and not all(used)  # both cases happen
    assert all(n <= budget for budget, n in calls)  # (a small window's plain runs too)
    for (budget, n), (next_budget, _) in itertools.pairwise(calls):
        assert next_budget == (2 * budget if n >= budget else budget)


def test_the_loop_leaves_the_bids_of_a_full_pass(monkeypatch):
    """The gradient update keeps each row's sets from its last bids (only the step's two rows
    are bid anew), so whenever the loop returns, its bids must be those a full pass gives:
    after cuts, eliminations and reconstructions, for C-SVC, nu-SVC and epsilon-SVR."""
    from sklearn.datasets import load_diabetes

    from psvm.svc import solver
    from psvm.svc.select import bids

    run, checked = solver.Solver._run, []

    def checked_run(self):
        event = run(self)
        w = self.window.arrays
        up, low = np.empty(w[2].size), np.empty(w[2].size)
        bids(w[2], w[3], w[4], w[5], w[7], up, low)
        checked.append(np.array_equal(up, w[9]) and np.array_equal(low, w[10]))
        return event

    monkeypatch.setattr(solver.Solver, "_run", checked_run)
    X, y = load_iris(return_X_y=True)
    clf = psvm.SVC(kernel="poly", gamma=1.0, heuristic="earliest").fit(X, y)
    psvm.NuSVC(nu=0.3, heuristic="earliest").fit(X, y)
    Xd, yd = load_diabetes(return_X_y=True)
    psvm.SVR(C=100.0, epsilon=5.0, heuristic="earliest").fit(Xd, yd)
    assert clf.fit_stats_["counts"]["n_relayout"] > 0
    assert len(checked) > 10 and all(checked)


def test_sampled_timers_never_exceed_the_engine_time(monkeypatch):
    """A stall in a timed iteration counts TIMED_EVERY times: the three sampled timers are cut,
    in proportion, to the time the engine calls took (less the column fills' own)."""
    from psvm.svc.traces import sampled_seconds

    timers = np.zeros(engine.N_TIMERS)
    timers[[engine.T_SELECT, engine.T_KERNEL]] = 0.001, 0.003
    plain = sampled_seconds(timers, 640, 10, 1.0)  # 64 iterations a timed one
    assert plain["select"] == pytest.approx(0.064) and plain["kernel"] == pytest.approx(0.192)
    cut = sampled_seconds(timers, 640, 10, 0.1)
    assert sum(cut.values()) == pytest.approx(0.1)
    assert cut["kernel"] == pytest.approx(3 * cut["select"]) and cut["comm"] == 0.0

    def stalled(*args):
        event = real(*args)
        args[11][engine.T_KERNEL] += 1.0  # a second's stall in a timed iteration
        return event

    real = serial.run_serial
    monkeypatch.setattr(serial, "run_serial", stalled)
    X, y = load_iris(return_X_y=True)
    seconds = psvm.SVC().fit(X[y > 0], y[y > 0]).fit_stats_["seconds_max"]
    assert 0 < seconds["kernel"] <= seconds["train"] < 1.0


def test_fills_and_allgathers_are_timed_each_and_not_scaled():
    """The column fills' and the Allgathers' own times (every call timed) count unscaled, and
    a stall cut leaves them whole: the sampled timers share what is left of the engine's."""
    from psvm.svc.traces import sampled_seconds

    timers = np.zeros(engine.N_TIMERS)
    timers[[engine.T_SELECT, engine.T_KERNEL, engine.T_FILLS, engine.T_COMM]] = (
        0.001, 0.003, 0.05, 0.02,
    )  # fmt: skip
    plain = sampled_seconds(timers, 640, 10, 1.0)
    assert plain["kernel"] == pytest.approx(0.192 + 0.05) and plain["select"] == 0.064
    assert plain["comm"] == 0.02
    cut = sampled_seconds(timers, 640, 10, 0.11)  # 0.04 s left for the sampled ones
    assert cut["kernel"] == pytest.approx(0.03 + 0.05) and cut["select"] == pytest.approx(0.01)
    assert cut["comm"] == 0.02
    assert sampled_seconds(timers, 640, 10, 0.01)["kernel"] == 0.05


@pytest.mark.parametrize(
    "make, loop, slot",  # the engine loop, in the solver's slot for it (module, name)
    [
        (psvm.SVC, serial.run_serial, (serial, "run_serial")),
        (psvm.SVC, engine.run, (serial, "run_serial")),  # the packets' loop on one process
        (psvm.NuSVC, engine_nu.run_nu, (engine_nu, "run_nu")),
    ],
    ids=["one process", "packets", "nu"],
)
def test_every_miss_and_allgather_reads_the_clock_around_itself(monkeypatch, make, loop, slot):
    """A clock that advances a million seconds a read: each miss and each Allgather adds
    exactly that, so their timers count them (heuristic none: every column is computed whole,
    never carried or completed), and the engine's real time leaves nothing for the sampled
    timers."""
    import ctypes

    from psvm.svc import solver

    calls, step = itertools.count(), 10**6

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64))
    def clock(_, ts):
        ts[0], ts[1] = step * next(calls), 0
        return 0

    seen, one_process = [], loop is serial.run_serial  # (before the slot is patched)

    def recording(*args):
        event = loop(*args)
        counts = args[10]
        seen.append((args[11][engine.T_FILLS], counts[engine.C_ROUND1] + counts[engine.C_ROUND2]))
        return event

    monkeypatch.setattr(solver, "CLOCK_FN", ctypes.cast(clock, ctypes.c_void_p).value)
    monkeypatch.setattr(*slot, recording)
    X, y = load_iris(return_X_y=True)
    clf = make(heuristic="none").fit(X[y > 0], y[y > 0])
    misses = clf.fit_stats_["counts"]["cache_misses"]
    fills, rounds = seen[-1]  # Allgathers: none in the one-process loop
    assert misses > 2 and fills == step * misses and (rounds > 0) != one_process
    seconds = clf.fit_stats_["seconds_max"]
    assert seconds["kernel"] == step * misses and seconds["comm"] == step * rounds


def test_iteration_limits():
    """-1 is no limit (scikit-learn's), None svm-train's max(10^7, 100 l), 0 stops at once."""
    from psvm.svc.solver import max_iterations

    assert max_iterations(-1, 10**6) == np.iinfo(np.int64).max
    assert max_iterations(None, 1000) == 10**7 and max_iterations(None, 10**6) == 10**8
    assert max_iterations(0, 10) == 0 and max_iterations(7, 10) == 7


def test_max_iter_0_and_gamma_0_as_sklearn():
    """scikit-learn takes max_iter=0 (no iteration: fit_status_ 1 and its warning) and
    gamma=0.0 (a constant rbf kernel)."""
    from sklearn import svm

    X, y = load_iris(return_X_y=True)
    with pytest.warns(ConvergenceWarning, match="max_iter=0"):
        clf = psvm.SVC(max_iter=0).fit(X, y)
    assert clf.fit_status_ == 1 and clf.n_iter_.tolist() == [0, 0, 0]
    ours, ref = psvm.SVC(gamma=0.0).fit(X, y), svm.SVC(gamma=0.0).fit(X, y)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    np.testing.assert_allclose(ours.dual_coef_, ref.dual_coef_, atol=1e-6)


@pytest.mark.parametrize("parts", [2, 3])
def test_threaded_passes_give_the_serial_winners(parts):
    """A large window's passes in threads (psvm.svc.passes): the first greatest bid (of each
    sign of y, the nu types) and the first smallest objective of the whole window, whatever
    part holds them, and the same gradient and bids, bit for bit. Ties everywhere: values from
    a few levels, -inf bids, -0.0 beside 0.0, and a part with no candidate at all."""
    import numba

    from psvm.svc.passes import (
        best_of_sign_threads,
        best_threads,
        second_order_nu_threads,
        second_order_threads,
        update_threads,
    )
    from psvm.svc.select import best, best_of_sign, second_order, second_order_nu
    from psvm.svc.update import update_gradient

    serial_best = numba.njit(lambda up, low, with_j: best(up, low, with_j))
    serial_update = numba.njit(
        lambda y, a, C, G, act, Ki, Kj, ci, cj, up, low, i, j: update_gradient(
            y, a, C, G, act, Ki, Kj, ci, cj, up, low, i, j
        )
    )
    rng = np.random.default_rng(parts)
    n = 20_000
    res, res_2 = np.empty(4 * parts), np.empty(8 * parts)
    for trial in range(20):
        levels = np.array([-np.inf, -1.0, -0.0, 0.0, 0.5, 2.0])
        up, low = rng.choice(levels, n), rng.choice(levels, n)
        if trial % 4 == 1:
            up[: n // 2] = -np.inf  # the first part has no candidate
        if trial % 4 == 2:
            low[:] = -np.inf  # I_low empty
        for with_j in (False, True):
            got = best_threads(up, low, with_j, parts, res)
            assert got == serial_best(up, low, with_j), (trial, with_j)
        y = rng.choice([-1.0, 1.0], n)
        if trial % 4 == 3:
            y[n // 2 :] = 1.0  # the last part has no row of y = -1
        for sign in (1.0, -1.0):  # the nu types: each sign of y apart
            got = best_of_sign_threads(up, low, y, sign, parts, res)
            assert got == best_of_sign(up, low, y, sign), (trial, sign)
        QD, K = rng.choice([1.0, 2.0], n), rng.choice([0.0, 0.5, 1.0], n)
        K_n = rng.choice([0.0, 0.5, 1.0], n)
        obj_a, obj_b = np.empty(n), np.empty(n)
        o, j = second_order_threads(low, QD, K, 0.5, 1.0, obj_a, parts, res)
        assert (o, j) == second_order(low, QD, K, 0.5, 1.0, obj_b), trial
        half = K[: n // 2]  # SVR: two variables a row, both halves reading the one column
        o, j = second_order_threads(low, QD, half, 0.5, 1.0, obj_a, parts, res_2)
        assert (o, j) == second_order(low, QD, half, 0.5, 1.0, obj_b), trial
        nu = (y, low, QD, K, K_n, 0.5, -0.5, 1.0, 2.0)
        o, j = second_order_nu_threads(*nu, obj_a, parts, res)
        assert (o, j) == second_order_nu(*nu, obj_b) and np.array_equal(obj_a, obj_b), trial
        signs = np.repeat([1.0, -1.0], n // 2)  # nu-SVR: each half one sign
        nu = (signs, low, QD, K[: n // 2], K_n[: n // 2], 0.5, -0.5, 1.0, 2.0)
        o, j = second_order_nu_threads(*nu, obj_a, parts, res_2)
        assert (o, j) == second_order_nu(*nu, obj_b), trial
        alpha, C = rng.choice([0.0, 0.5, 1.0], n), np.ones(n)
        G, act = rng.normal(size=n), rng.random(n) < 0.9
        Ki, Kj = rng.random(n), rng.random(n)
        bids_up, bids_low = up.copy(), low.copy()
        G_a, up_a, low_a = G.copy(), up.copy(), low.copy()
        q_j = -1 if trial % 2 else n - 3  # (-1: the step's other row is another rank's)
        if trial % 3 == 2:  # SVR's halves
            Ki, Kj = Ki[: n // 2], Kj[: n // 2]
        update_threads(y, alpha, C, G_a, act, Ki, Kj, 0.3, -0.7, up_a, low_a, 7, q_j, parts)
        serial_update(y, alpha, C, G, act, Ki, Kj, 0.3, -0.7, bids_up, bids_low, 7, q_j)
        assert np.array_equal(G_a, G) and np.array_equal(up_a, bids_up, equal_nan=True)
        assert np.array_equal(low_a, bids_low, equal_nan=True)


@pytest.mark.parametrize(
    "params",
    [{}, {"selection": "first", "heuristic": "earliest"}, {"heuristic": "none", "C": 10.0}],
)
def test_a_large_window_in_threads_has_the_bits_of_one_thread(shared_data, params):
    """At P = 1 the passes of a window of 16,384 rows or more run in the rank's threads
    (psvm.svc.passes): the same model, iterations, counts and traces as one thread."""
    from tests._svm import load_head

    X, y = load_head(shared_data / "a9a.xz", 20_000, n_features=123)
    fits = [psvm.SVC(gamma=0.05, n_threads=t, **params).fit(X, y) for t in (1, 2)]
    for name in ("dual_coef_", "intercept_", "support_", "n_iter_"):
        a, b = (getattr(f, name) for f in fits)
        a, b = (v.toarray() if hasattr(v, "toarray") else v for v in (a, b))  # (sparse X)
        assert np.array_equal(a, b), name
    one, two = (f.fit_stats_ for f in fits)
    assert one["counts"] == two["counts"] and two["values"]["n_threads"] == 2
    for name in ("iter", "gap", "active", "cache_misses"):
        assert one["traces"][name] == two["traces"][name], name


@pytest.mark.parametrize("kind", ["nu_svc", "svr", "nu_svr"])
def test_a_large_nu_or_svr_window_in_threads_has_the_bits_of_one_thread(shared_data, kind):
    """nu-SVC's loop (Solver_NU) and SVR's windows of two variables a row (both loops) run
    their passes in the threads too: the same model, iterations and counts as one thread."""
    from tests._svm import load_head

    if kind != "nu_svc":  # 20,640 rows, the targets scaled
        X, y = load_head(shared_data / "cadata_scale.xz", 20_640, n_features=8)
        make = psvm.SVR if kind == "svr" else psvm.NuSVR
        fits = [make(gamma=1.0, n_threads=t).fit(X, y / 1e5) for t in (1, 2)]
    else:
        X, y = load_head(shared_data / "a9a.xz", 20_000, n_features=123)
        fits = [psvm.NuSVC(nu=0.3, gamma=0.05, n_threads=t).fit(X, y) for t in (1, 2)]
    for name in ("dual_coef_", "intercept_", "support_", "n_iter_"):
        a, b = (getattr(f, name) for f in fits)
        a, b = (v.toarray() if hasattr(v, "toarray") else v for v in (a, b))
        assert np.array_equal(a, b), name
    one, two = (f.fit_stats_ for f in fits)
    assert one["counts"] == two["counts"] and two["values"]["n_threads"] == 2
