"""Parallel SGD linear SVM, serial parts: kernels against numpy, estimator, model file, CLI."""

import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import psvm
from psvm._params import SGD_SCHEDULES, ParameterError, validate_sgd_params
from psvm.comm import Comm
from psvm.io.linear_model_file import is_linear_model_file, read_linear_model, write_linear_model
from psvm.sgd import steps
from psvm.sgd.estimator import SGDSVC
from psvm.sgd.model import LinearModel
from psvm.sgd.msf import AutoMSF, FixedPeriod, make_policy
from psvm.sgd.problem import SGDState, class_shares, held_out, row_hash
from psvm.sgd.trainer import block_order

# -- a plain numpy reference of the SGD steps ------------------------------------------


def reference_sgd(X, codes, sw, order, schedule, hp, pos_code, pos_w, neg_w):
    """Dense textbook SGD on lambda/2|w|^2 + hinge, with t-weighted averaging."""
    lam, eta0, t0, epoch, bias_lr, avg_start = hp[:6]
    k, d = len(pos_code), X.shape[1]
    w, b = np.zeros((k, d)), np.zeros(k)
    S, Sb, navg, t = np.zeros((k, d)), np.zeros(k), 0.0, 0.0
    for i in order:
        t += 1
        eta = {0: 1 / (lam * t), 1: 1 / (lam * (t0 + (t - 1))), 2: eta0, 3: 1 / (lam * epoch)}
        eta = eta[schedule]
        avg_on = avg_start > 0 and t >= avg_start
        a = t - avg_start + 1
        for c in range(k):
            y = 1.0 if codes[i] == pos_code[c] else -1.0
            wc = sw[i] * (pos_w[c] if y > 0 else neg_w[c])
            margin = y * (w[c] @ X[i] + b[c])
            w[c] *= max(0.0, 1 - eta * lam)
            if margin < 1 and wc != 0:
                w[c] += eta * wc * y * X[i]
                b[c] += bias_lr * eta * wc * y
            if avg_on:
                S[c] += a * w[c]
                Sb[c] += a * b[c]
        if avg_on:
            navg += a
    return w, b, S, Sb, navg


def toy(seed=0, n=40, d=7, n_classes=2):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.4, random_state=seed, format="csr") * 3
    X = X.tolil()
    X[3, :] = 0  # an empty row
    X[5, :] = X[4, :]  # a duplicate row
    X = X.tocsr()
    X.sort_indices()
    codes = rng.integers(0, n_classes, n).astype(np.int64)
    return X.tocsr(), codes


def run_kernel(X, codes, sw, order, schedule, hp, pos_code, pos_w, neg_w, chunks=1):
    k, d = len(pos_code), X.shape[1]
    s = SGDState.zeros(k, d, 0, 0)
    bounds = np.linspace(0, len(order), chunks + 1).astype(int)
    ip, ind, dat = X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        steps.sgd_steps(
            ip,
            ind,
            dat,
            codes,
            sw,
            order,
            lo,
            hi,
            schedule,
            hp,
            s.V,
            s.scale,
            s.b,
            s.U,
            s.csum,
            s.bsum,
            pos_code,
            pos_w,
            neg_w,
            s.st,
        )
    return s


def make_hp(lam=0.05, eta0=0.1, epoch=1, bias_lr=1.0, avg_start=1):
    hp = np.zeros(steps.N_HP)
    hp[:6] = [lam, eta0, steps.optimal_t0(lam), epoch, bias_lr, avg_start]
    return hp


@pytest.mark.parametrize("schedule", list(steps.SCHEDULES.values()))
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("avg_start", [0, 1, 17])
def test_steps_match_numpy_reference(schedule, n_classes, avg_start):
    X, codes = toy(schedule + 10 * n_classes, n_classes=n_classes)
    rng = np.random.default_rng(1)
    sw = rng.uniform(0.5, 2.0, X.shape[0])
    order = np.concatenate([rng.permutation(X.shape[0]), rng.permutation(X.shape[0])])
    if n_classes == 2:
        pos_code, pos_w, neg_w = np.array([1]), np.array([1.5]), np.array([0.7])
    else:
        pos_code, pos_w, neg_w = np.arange(3), np.array([1.0, 2.0, 0.5]), np.ones(3)
    hp = make_hp(avg_start=avg_start, epoch=2)
    s = run_kernel(X, codes, sw, order, schedule, hp, pos_code, pos_w, neg_w, chunks=5)
    w, b, S, Sb, navg = reference_sgd(
        X.toarray(), codes, sw, order, schedule, hp, pos_code, pos_w, neg_w
    )
    np.testing.assert_allclose(s.scale[:, None] * s.V, w, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(s.b, b, rtol=1e-9, atol=1e-12)
    assert s.st[steps.S_T] == len(order) and s.st[steps.S_NAVG] == navg
    if avg_start:  # U + csum V cancels terms: compare at the sums' own scale
        scale = np.abs(S).max()
        np.testing.assert_allclose(s.U + s.csum[:, None] * s.V, S, rtol=0, atol=1e-7 * scale)
        np.testing.assert_allclose(s.bsum, Sb, rtol=1e-9, atol=1e-9)


def test_renormalisation_keeps_the_model():
    """A constant schedule with eta*lambda near 1 shrinks the scale below MIN_SCALE often."""
    X, codes = toy(3)
    order = np.tile(np.arange(X.shape[0]), 5)
    hp = make_hp(lam=0.9, eta0=1.0, avg_start=1)
    one = np.ones(1)
    s = run_kernel(X, codes, np.ones(40), order, steps.CONSTANT, hp, np.array([1]), one, one)
    w, b, S, _, _ = reference_sgd(
        X.toarray(), codes, np.ones(40), order, steps.CONSTANT, hp, [1], one, one
    )
    np.testing.assert_allclose(s.scale[:, None] * s.V, w, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(s.U + s.csum[:, None] * s.V, S, atol=1e-7 * np.abs(S).max())


def test_learning_rates():
    hp = make_hp(lam=0.01, eta0=0.3, epoch=4)
    assert steps.learning_rate(steps.PEGASOS, 5.0, hp) == pytest.approx(1 / (0.01 * 5))
    assert steps.learning_rate(steps.CONSTANT, 5.0, hp) == 0.3
    assert steps.learning_rate(steps.EPOCH, 5.0, hp) == pytest.approx(1 / (0.01 * 4))
    # optimal: eta at the first step is lambda^-1/4, as in scikit-learn
    assert steps.learning_rate(steps.OPTIMAL, 1.0, hp) == pytest.approx(0.01**-0.25)
    # also where t0 is far below 1 (t0 + 1 - 1 was 0: ZeroDivisionError at alpha = 1e30)
    assert steps.learning_rate(steps.OPTIMAL, 1.0, make_hp(lam=1e30)) == pytest.approx(10**-7.5)
    assert tuple(steps.SCHEDULES) == SGD_SCHEDULES


def test_a_diverging_fit_is_refused_and_leaves_the_model():
    """Steps that overflow the weights (a tiny alpha with its huge learning rate) gave NaN
    coef_ and predictions of one class without a word; scikit-learn's SGD raises. Refused
    (every rank alike: the model and objective are agreed), the previous model kept."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = (X[:, 0] > 0).astype(int)
    est = SGDSVC(random_state=0).fit(X, y)
    coef = est.coef_.copy()
    with pytest.raises(ValueError, match=r"SGD diverged in epoch \d+: the weights overflowed"):
        est.set_params(alpha=1e-300, learning_rate="epoch").fit(X, y)
    np.testing.assert_array_equal(est.coef_, coef)


def test_pack_unpack_is_a_weighted_average():
    rng = np.random.default_rng(0)
    models = [(rng.normal(size=(2, 4)), rng.uniform(0.5, 2, 2), rng.normal(size=2)) for _ in "ab"]
    weights = [3.0, 1.0]
    total = np.zeros(2 * 5 + 1)
    for (V, scale, b), wt in zip(models, weights, strict=True):
        buf = np.empty_like(total)
        steps.pack_model(V, scale, b, wt, buf)
        total += buf
    V, scale, b = models[0][0].copy(), models[0][1].copy(), models[0][2].copy()
    U, csum = np.zeros((2, 4)), np.array([2.0, 0.0])
    S_before = U + csum[:, None] * V
    steps.unpack_model(total, V, scale, b, U, csum)
    want = sum(wt * s[:, None] * v for (v, s, _), wt in zip(models, weights, strict=True)) / 4
    np.testing.assert_allclose(scale[:, None] * V, want)
    np.testing.assert_allclose(b, (3 * models[0][2] + models[1][2]) / 4)
    np.testing.assert_allclose(U + csum[:, None] * V, S_before + 0 * V)  # sums folded exactly
    V2 = V.copy()
    steps.unpack_model(np.zeros_like(total), V, scale, b, U, csum)  # nobody stepped: unchanged
    np.testing.assert_array_equal(V, V2)


def test_hinge_sums_and_count_correct_match_numpy():
    X, codes = toy(4, n_classes=3)
    rng = np.random.default_rng(2)
    W, w0, sw = rng.normal(size=(3, 7)), rng.normal(size=3), rng.uniform(0.5, 2, 40)
    pos_w, neg_w = np.array([1.0, 2.0, 3.0]), np.ones(3)
    out = np.empty(3)
    ip, ind = X.indptr.astype(np.int64), X.indices.astype(np.int32)
    steps.hinge_sums(ip, ind, X.data, codes, sw, W, w0, np.arange(3), pos_w, neg_w, out)
    dec = X @ W.T + w0
    Y = np.where(codes[:, None] == np.arange(3), 1.0, -1.0)
    weight = sw[:, None] * np.where(Y > 0, pos_w, neg_w)
    np.testing.assert_allclose(out, (weight * np.maximum(0, 1 - Y * dec)).sum(0))
    correct = steps.count_correct(ip, ind, X.data, codes, sw, W, w0, np.arange(3))
    assert correct == pytest.approx(sw[dec.argmax(1) == codes].sum())
    binary = (codes > 0).astype(np.int64)
    got = steps.count_correct(ip, ind, X.data, binary, np.ones(40), W[:1], w0[:1], np.array([1]))
    assert got == int(((dec[:, 0] > 0).astype(int) == binary).sum())


def test_block_order_is_a_permutation():
    order = block_order(np.random.default_rng(0), 103, 8)
    assert sorted(order.tolist()) == list(range(103))
    assert order.dtype == np.int64


# -- the estimator ------------------------------------------------------------------


def blobs(n=300, n_classes=2, seed=0):
    from sklearn.datasets import make_blobs

    return make_blobs(
        n_samples=n, centers=n_classes, n_features=5, random_state=seed, cluster_std=2.0
    )


def test_same_seed_same_model_and_p1_ignores_the_period():
    X, y = blobs()
    a = SGDSVC(alpha=1e-3, random_state=3, sync_every=1).fit(X, y)
    b = SGDSVC(alpha=1e-3, random_state=3, sync_every="auto").fit(X, y)
    c = SGDSVC(alpha=1e-3, random_state=4).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert not np.array_equal(a.coef_, c.coef_)
    assert a.fit_stats_["counts"].get("n_sync", 0) == 0  # one process: nothing to average


def test_fit_equals_the_reference_run():
    """One epoch through the estimator is the numpy reference on the same row order."""
    X, y = blobs(60)
    est = SGDSVC(alpha=0.01, shuffle=False, max_iter=1, tol=None, average=True).fit(X, y)
    hp = make_hp(lam=0.01, bias_lr=1.0, avg_start=1)
    codes = np.searchsorted(est.classes_, y)
    _, _, S, Sb, navg = reference_sgd(
        X, codes, np.ones(60), np.arange(60), steps.OPTIMAL, hp, [1], np.ones(1), np.ones(1)
    )
    np.testing.assert_allclose(est.coef_, S / navg, rtol=1e-9)
    np.testing.assert_allclose(est.intercept_, Sb / navg, rtol=1e-9)
    last = SGDSVC(alpha=0.01, shuffle=False, max_iter=1, tol=None, average=False).fit(X, y)
    w, b, *_ = reference_sgd(
        X, codes, np.ones(60), np.arange(60), steps.OPTIMAL, hp, [1], np.ones(1), np.ones(1)
    )
    np.testing.assert_allclose(last.coef_, w, rtol=1e-9)


def test_averaging_smooths_the_model():
    X, y = blobs(400, seed=1)
    kw = dict(alpha=1e-4, random_state=0, max_iter=3, tol=None)
    avg = SGDSVC(average=True, **kw).fit(X, y)
    last = SGDSVC(average=False, **kw).fit(X, y)
    assert avg.score(X, y) >= last.score(X, y) - 0.02
    assert avg.fit_stats_["traces"]["objective"][-1] < last.fit_stats_["traces"]["objective"][0]


def test_multiclass_one_vs_rest():
    X, y = blobs(450, n_classes=3, seed=2)
    est = SGDSVC(alpha=1e-3, random_state=0).fit(X, y)
    assert est.coef_.shape == (3, 5) and est.intercept_.shape == (3,)
    assert est.decision_function(X).shape == (450, 3)
    assert est.score(X, y) > 0.9
    np.testing.assert_array_equal(est.predict(X), est.classes_[est.decision_function(X).argmax(1)])


def test_stopping_and_partial_fit():
    X, y = blobs()
    est = SGDSVC(alpha=1e-2, random_state=0, tol=1e-3, n_iter_no_change=2).fit(X, y)
    assert est.fit_status_ == 0 and 3 <= est.n_iter_ < 1000
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="max_iter"):
        bad = SGDSVC(alpha=1e-2, random_state=0, max_iter=1).fit(X, y)
    assert bad.fit_status_ == 1
    p = SGDSVC(alpha=1e-2, random_state=0, shuffle=False)
    with pytest.raises(ValueError, match="classes must be passed"):
        p.partial_fit(X, y)
    p.partial_fit(X, y, classes=[0, 1])
    t1 = p.t_
    p.partial_fit(X, y)
    assert p.n_iter_ == 1 and p.t_ == 2 * t1  # this call's epoch; the steps count on
    ref = SGDSVC(alpha=1e-2, random_state=0, shuffle=False, max_iter=2, tol=None).fit(X, y)
    np.testing.assert_allclose(p.coef_, ref.coef_)  # two partial fits = two epochs
    with pytest.raises(ValueError, match="not in classes"):
        p.partial_fit(X, y + 5)


def _primal(est, X, y, alpha):
    """alpha/2 |w|^2 + the mean hinge loss (two classes)."""
    s = np.where(y == est.classes_[1], 1.0, -1.0)
    margin = s * (X @ est.coef_[0] + est.intercept_[0])
    return alpha / 2 * (est.coef_**2).sum() + np.maximum(0.0, 1.0 - margin).mean()


def test_warm_start_starts_from_the_last_fit():
    """As SGDClassifier: fit starts from coef_ and intercept_, its steps and average afresh."""
    X, y = blobs(400, seed=1)
    kw = dict(alpha=1e-4, random_state=0, tol=None)
    ref = SGDSVC(max_iter=100, **kw).fit(X, y)
    cold = SGDSVC(max_iter=1, **kw).fit(X, y)
    warm = SGDSVC(max_iter=100, warm_start=True, **kw).fit(X, y)
    warm.set_params(max_iter=1).fit(X, y)
    assert warm.n_iter_ == 1 and warm.t_ == cold.t_  # one epoch, counted afresh
    primal = [_primal(e, X, y, 1e-4) for e in (ref, cold, warm)]
    assert primal[2] < 2 * primal[0] and primal[2] < 0.1 * primal[1], primal
    # without warm_start a second fit is a first one, bit for bit
    again = SGDSVC(max_iter=100, **kw).fit(X, y).set_params(max_iter=1).fit(X, y)
    np.testing.assert_array_equal(again.coef_, cold.coef_)
    # no intercept now: the last one is dropped
    flat = SGDSVC(max_iter=1, warm_start=True, **kw).fit(X, y)
    assert flat.set_params(fit_intercept=False).fit(X, y).intercept_[0] == 0.0
    before = warm.predict(X)
    with pytest.raises(ValueError, match="warm_start: X has 4 features, the last fit 5"):
        warm.fit(X[:, :4], y)
    assert warm.n_features_in_ == 5  # refused: the model still predicts
    np.testing.assert_array_equal(warm.predict(X), before)
    with pytest.raises(ValueError, match=r"warm_start: y has classes \[0, 1, 2\], the last"):
        warm.fit(X, np.where(np.arange(y.size) % 3 == 0, 2, y))
    with pytest.raises(TypeError):
        SGDSVC(1e-4)  # keyword-only, as scikit-learn's estimators


def test_early_stopping_holds_out_rows_and_stops_on_their_accuracy():
    """As SGDClassifier(early_stopping=True): a share of the rows is scored after every
    epoch, not trained on, and training stops once their accuracy has not improved by tol
    for n_iter_no_change epochs."""
    X, y = blobs(1000, seed=3)
    kw = dict(alpha=1e-4, random_state=0, max_iter=300, n_iter_no_change=3)
    est = SGDSVC(early_stopping=True, validation_fraction=0.2, **kw).fit(X, y)
    assert est.fit_stats_["values"]["n_samples"] == 800  # ceil(0.2 n) rows held out
    accuracy = est.fit_stats_["traces"]["val_accuracy"]
    assert est.fit_status_ == 0 and est.n_iter_ == len(accuracy) < 300
    error = 1.0 - np.array(accuracy)
    for e in range(len(error) - 3, len(error)):  # each of the last 3: no gain of tol
        assert error[e] > error[:e].min() - 1e-3
    plain = SGDSVC(**kw).fit(X, y)  # all rows, the objective's rule
    assert plain.fit_stats_["values"]["n_samples"] == 1000
    assert plain.fit_stats_["traces"]["val_accuracy"][0] is None
    with pytest.raises(ParameterError, match="validation_fraction must be < 1"):
        SGDSVC(early_stopping=True, validation_fraction=1.0).fit(X, y)
    with pytest.raises(ValueError, match="holds out 1 of 4 rows; each part needs at least 2"):
        SGDSVC(early_stopping=True, validation_fraction=1e-9).fit(X[:4], y[:4])
    with pytest.raises(ValueError, match="class 2 has only 1 row; each class needs 2"):
        SGDSVC(early_stopping=True).fit(X[:40], np.r_[y[:39], 2])


def test_early_stopping_split_is_stratified_and_the_same_for_every_p():
    """StratifiedShuffleSplit's counts, each class's rows those of the smallest hashes; ranks
    holding pieces of the rows (one none) find the same rows by their sums alone."""
    import threading
    from types import SimpleNamespace

    from sklearn.model_selection import StratifiedShuffleSplit

    y = np.repeat([0, 1, 2], [900, 100, 7])
    share = class_shares(np.bincount(y), int(np.ceil(0.2 * y.size)))
    held = held_out(Comm(), 7, 0, y, share)
    split = StratifiedShuffleSplit(test_size=0.2, random_state=0)
    _, test = next(split.split(np.zeros((y.size, 1)), y))
    assert np.bincount(y[held]).tolist() == np.bincount(y[test]).tolist() == [181, 20, 1]
    z = row_hash(7, 0, y.size)
    for c in range(3):  # of each class, the rows with the smallest hashes
        assert z[(y == c) & held].max() < z[(y == c) & ~held].min()
    assert not np.array_equal(held, held_out(Comm(), 8, 0, y, share))  # the seed's rows
    cuts = [0, 0, 400, 950, y.size]  # four ranks, the first with no rows
    barrier, slots, parts = threading.Barrier(4), [None] * 4, [None] * 4

    def rank(r):
        def sum_(x):
            slots[r] = np.asarray(x)
            barrier.wait()
            total = sum(slots)
            barrier.wait()
            return total

        a, b = cuts[r], cuts[r + 1]
        parts[r] = held_out(SimpleNamespace(sum_=sum_), 7, a, y[a:b], share)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(np.concatenate(parts), held)


def test_early_stopping_scores_held_out_rows_by_their_weight(monkeypatch):
    """As SGDClassifier: the held-out rows' accuracy is weighted by their sample_weight
    (score(X_val, y_val, sample_weight_val)), not a count of rows."""
    X, y = blobs(600, seed=5)
    rng = np.random.default_rng(5)
    y = np.where(rng.random(y.size) < 0.2, 1 - y, y)  # noisy labels: some rows always wrong
    w = rng.uniform(0.1, 5.0, y.size)
    masks, original = [], SGDSVC._held_out

    def kept(*args):  # the rows held out, as the fit chose them
        masks.append(original(*args))
        return masks[-1]

    monkeypatch.setattr(SGDSVC, "_held_out", staticmethod(kept))
    kw = dict(alpha=1e-2, random_state=0, max_iter=2, tol=None)
    est = SGDSVC(early_stopping=True, validation_fraction=0.3, **kw).fit(X, y, sample_weight=w)
    (held,) = masks
    right = est.predict(X[held]) == y[held]
    assert not right.all()  # else both scores are 1
    last = est.fit_stats_["traces"]["val_accuracy"][-1]
    assert last == pytest.approx(np.average(right, weights=w[held]))
    assert last != pytest.approx(right.mean())


def test_partial_fit_reads_the_parameters_of_each_call():
    """As SGDClassifier: set_params between partial_fit calls takes effect."""
    X, y = blobs()
    a, b = (SGDSVC(alpha=1e-2, random_state=0, shuffle=False) for _ in range(2))
    for est in (a, b):
        est.partial_fit(X, y, classes=[0, 1])
    a.set_params(alpha=10.0)
    a.partial_fit(X, y)
    b.partial_fit(X, y)
    ref = SGDSVC(alpha=1e-2, random_state=0, shuffle=False, max_iter=2, tol=None).fit(X, y)
    np.testing.assert_allclose(b.coef_, ref.coef_)
    assert np.abs(a.coef_).sum() < 0.9 * np.abs(b.coef_).sum()  # the larger alpha shrank it


def test_a_refused_fit_leaves_the_estimator_as_it_was():
    """Bad class weights (nan, <= 0, not a dict) are refused before any fitted state
    changes, n_features_in_ included: the previous model still predicts, a fresh estimator
    stays unfitted."""
    from sklearn.exceptions import NotFittedError

    X, y = blobs()
    est = SGDSVC(random_state=0).fit(X, y)
    before = est.predict(X)
    y3 = np.where(np.arange(y.size) % 3 == 0, 2, y)
    for cw in ("heavy", {1: -2.0}, {0: np.nan}, {1: np.inf}):
        est.set_params(class_weight=cw)
        with pytest.raises(ParameterError, match="class_weight"):
            est.fit(X[:, :4], y3)  # (validating X had set n_features_in_ = 4)
        assert est.classes_.tolist() == [0, 1] and est.coef_.shape == (1, X.shape[1])
        assert est.n_features_in_ == X.shape[1]
        np.testing.assert_array_equal(est.predict(X), before)
        fresh = SGDSVC(class_weight=cw)
        with pytest.raises(ParameterError, match="class_weight"):
            fresh.fit(X, y)
        with pytest.raises(NotFittedError):
            fresh.predict(X)


def test_a_class_weight_of_zero_weighs_its_rows_nothing():
    """As SGDClassifier, a class weight may be 0 (the kernel face refuses it). With two classes
    the model is then the one whose rows of that class have sample weight 0 (with more, a class
    weight weighs the class's rows in its own one-vs-rest problem only, as there)."""
    X, y = blobs()
    got = SGDSVC(random_state=0, class_weight={1: 0.0}).fit(X, y)
    ref = SGDSVC(random_state=0).fit(X, y, sample_weight=(y != 1).astype(float))
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)


def test_parameter_errors_name_the_parameter():
    X, y = blobs(50)
    for kw, name in [
        (dict(alpha=0), "alpha"),
        (dict(sync_every=0), "sync_every"),
        (dict(sync_every="often"), "sync_every"),
        (dict(learning_rate="adam"), "learning_rate"),
        (dict(max_iter=0), "max_iter"),
        (dict(average=-2), "average"),
        (dict(msf_target=1.0), "msf_target"),
        (dict(learning_rate="constant", eta0=0), "eta0"),
        (dict(tol=-1), "tol"),
        (dict(shuffle="yes"), "shuffle must be a bool"),
        (dict(fit_intercept=1), "fit_intercept must be a bool"),
        (dict(early_stopping=None), "early_stopping must be a bool"),
        (dict(warm_start="no"), "warm_start must be a bool"),
        (dict(early_stopping=True, validation_fraction=0), "validation_fraction"),
    ]:
        with pytest.raises(ParameterError, match=name):
            SGDSVC(**kw).fit(X, y)
    with pytest.raises(ValueError, match="distributed"):
        SGDSVC(distributed="both").fit(X, y)
    with pytest.raises(ValueError, match="class_weight"):
        SGDSVC(class_weight="heavy").fit(X, y)
    with pytest.raises(ValueError, match=r"greater than one; got 1 class \(0.0\)$"):
        SGDSVC().fit(X, np.zeros(50))
    assert validate_sgd_params(sync_every=8, average=False).average == 0
    assert validate_sgd_params(shuffle=np.False_).shuffle is False  # numpy's bools are bools


def test_class_weight_of_a_missing_class_warns_as_libsvm():
    """As psvm.SVC: LIBSVM's warning, and the model of the weights that apply."""
    X, y = blobs()
    with pytest.warns(UserWarning, match="^class label 7 specified in weight is not found$"):
        ours = SGDSVC(random_state=0, class_weight={1: 2.0, 7: 3.0}).fit(X, y)
    ref = SGDSVC(random_state=0, class_weight={1: 2.0}).fit(X, y)
    np.testing.assert_array_equal(ours.coef_, ref.coef_)
    np.testing.assert_array_equal(ours.intercept_, ref.intercept_)


def test_weight_and_class_rules_of_the_shared_input_path():
    """psvm.SVC's input path with SGD's two rules: zero weights, and partial_fit's classes."""
    X, y = blobs(60)
    with pytest.raises(ValueError, match="zero for every sample: nothing to learn from"):
        SGDSVC().fit(X, y, sample_weight=np.zeros(60))
    # SGD steps over rows of weight 0: a class without weight is no error (psvm.SVC's is)
    est = SGDSVC(random_state=0).fit(X, y, sample_weight=(y == 1).astype(float))
    assert est.classes_.tolist() == [0, 1] and (est.predict(X[y == 1]) == 1).all()
    with pytest.raises(ValueError, match=r"positive sample_weight belong to one class \(1\)"):
        psvm.SVC().fit(X, y, sample_weight=(y == 1).astype(float))
    # a partial_fit batch may lack a class of classes; 'balanced' weights, computed from one
    # batch, are refused there, as SGDClassifier refuses them
    zeros = y == 0
    with pytest.raises(ParameterError, match="class_weight='balanced' is not supported for"):
        SGDSVC(class_weight="balanced").partial_fit(X, y, classes=[0, 1])
    est = SGDSVC(random_state=0)
    est.partial_fit(X[zeros], y[zeros], classes=[1, 0])
    assert est.classes_.tolist() == [0, 1] and est.n_iter_ == 1
    with pytest.raises(ValueError, match=r"classes \[0, 2\] differ from the first call's"):
        est.partial_fit(X, y, classes=[0, 2])
    with pytest.raises(ValueError, match="classes must hold at least two labels"):
        SGDSVC().partial_fit(X, y, classes=[0])


def test_estimator_defaults_are_the_config_defaults():
    """SGDSVC's signature (sklearn needs it spelled out) repeats SGDConfig's defaults."""
    import dataclasses
    import inspect

    from psvm._params import SGDConfig

    signature = inspect.signature(SGDSVC).parameters
    shared = [f for f in dataclasses.fields(SGDConfig) if f.name in signature]
    assert len(shared) >= 12
    for f in shared:
        assert signature[f.name].default == f.default, f.name
    with pytest.raises(TypeError, match="random_state"):
        validate_sgd_params(random_state=0)


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    why = "SGD visits a row of weight 2 once, a repeated row twice (as SGDClassifier)"
    expected = {
        "check_sample_weight_equivalence_on_dense_data": why,
        "check_sample_weight_equivalence_on_sparse_data": why,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(SGDSVC(), expected_failed_checks=expected)


def test_lazy_export():
    import psvm

    assert psvm.SGDSVC is SGDSVC


# -- MSF policies ---------------------------------------------------------------------


def test_auto_msf_cost_period_and_backoff():
    pol = AutoMSF(target=0.1, costs=(1e-7, 1e-5))  # sync = 100 steps: need p >= 900
    assert pol.start(100_000) == 1024
    assert pol.end_epoch(1, 0.5) == 1024
    assert pol.end_epoch(2, 0.4) == 1024
    assert pol.end_epoch(3, 0.45) == 512 and pol.n_backoff == 1  # worse: sync more often
    assert pol.end_epoch(4, 0.44) == 512  # better again: the ceiling stays
    assert pol.end_epoch(5, 0.43, val_accuracy=0.9) == 512
    assert pol.end_epoch(6, 0.42, val_accuracy=0.8) == 256  # validation accuracy fell
    assert AutoMSF(costs=(1e-7, 1e-5)).start(300) == 300  # never more than one epoch
    assert AutoMSF(costs=(1e-6, 1e-9)).start(300) == 1
    assert FixedPeriod(8).start(4) == 4 and FixedPeriod(8).start(100) == 8
    assert isinstance(make_policy("auto"), AutoMSF) and isinstance(make_policy(3), FixedPeriod)


def test_comm_sum_inplace_single_process():
    buf = np.arange(3.0)
    assert Comm().sum_inplace(buf) is buf and buf.tolist() == [0.0, 1.0, 2.0]


# -- LIBLINEAR model file -----------------------------------------------------------------


def test_liblinear_round_trip(tmp_path):
    X, y = blobs(200, n_classes=3)
    y = y * 2 - 1  # labels -1, 1, 3
    est = SGDSVC(alpha=1e-3, random_state=0).fit(X, y)
    path = tmp_path / "m.model"
    est.to_liblinear_model(path)  # write_linear_model(path, est.to_linear_model())
    assert os.listdir(tmp_path) == ["m.model"]  # no temporary file left
    text = path.read_text().splitlines()
    assert text[:6] == [
        "solver_type L2R_L1LOSS_SVC_DUAL",
        "nr_class 3",
        "label -1 1 3",
        "nr_feature 5",
        "bias 1",
        "w",
    ]
    assert len(text) == 6 + 6 and is_linear_model_file(path)
    m = read_linear_model(path)
    np.testing.assert_array_equal(m.coef, est.coef_)
    np.testing.assert_array_equal(m.intercept, est.intercept_)
    np.testing.assert_array_equal(m.predict(X), est.predict(X))
    Xb, yb = blobs(100)
    bin_est = SGDSVC(alpha=1e-3, random_state=0).fit(Xb, yb)
    write_linear_model(path, bin_est.to_linear_model())
    assert path.read_text().splitlines()[2] == "label 1 0"  # positive class first
    np.testing.assert_array_equal(read_linear_model(path).predict(Xb), bin_est.predict(Xb))
    no_bias = SGDSVC(alpha=1e-3, random_state=0, fit_intercept=False).fit(X, y)
    no_bias.to_liblinear_model(path)  # LIBLINEAR's model without a bias: bias -1, no bias row
    text = path.read_text().splitlines()
    assert text[4] == "bias -1" and len(text) == 6 + 5
    np.testing.assert_array_equal(
        read_linear_model(path).decision_function(X), no_bias.decision_function(X)
    )


def test_reads_liblinear_written_models(tmp_path):
    path = tmp_path / "l.model"
    path.write_text(
        "solver_type L2R_L2LOSS_SVC_DUAL\nnr_class 2\nlabel 1 -1\nnr_feature 2\n"
        "bias -1\nw\n0.5 \n-1 \n"
    )
    m = read_linear_model(path)
    assert m.predict(np.array([[1.0, 0.0], [0.0, 1.0]])).tolist() == [1, -1]
    assert m.intercept.tolist() == [0.0]


@pytest.mark.parametrize("text, line, match", [
    ("solver_type L2R_L2LOSS_SVR\nnr_class 2\n", 1, "not a classification"),
    ("solver_type L2R_LR\nnr_class 2\nlabel 1 2\nnr_feature 1\nbias 1\nw\n0.1\n", 8, "ends after"),
    ("solver_type L2R_LR\nnr_class 2\nlabel 1 2\nnr_feature 1\nbias -1\nw\nx\n", 7, "a weight"),
    ("solver_type L2R_LR\nnr_class 2\nlabel 1\nnr_feature 1\nbias -1\nw\n1\n", 3, "label"),
    ("solver_type L2R_LR\nnr_class 2\nfoo 1\n", 3, "unknown header"),
    ("solver_type L2R_LR\nnr_class 2\nlabel 1 2\nnr_feature 1\nbias -1\nw\n1\n2\n", 8, "more"),
    ("solver_type L2R_LR\nnr_class 2\nlabel 1 2\nnr_feature 1\nbias -1\nw\n1_0\n", 7, "'1_0'"),
    ("solver_type L2R_LR\nnr_class 2\nlabel 1_0 2\nnr_feature 1\nbias -1\nw\n1\n", 3, "1_0"),
])  # fmt: skip
def test_bad_linear_models_name_the_line(tmp_path, text, line, match):
    path = tmp_path / "bad.model"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as e:
        read_linear_model(path)
    assert e.value.line == line and str(path) in str(e.value)


@pytest.mark.parametrize("labels", [[0.5, 1.5], [1.0, 2.0**31], [-(2.0**31) - 1, 1.0]])
def test_labels_liblinear_cannot_read_back_are_refused(tmp_path, labels):
    with pytest.raises(ValueError, match="integer labels"):
        write_linear_model(tmp_path / "m", LinearModel(np.ones((1, 2)), [0.0], labels))
    assert not os.listdir(tmp_path)


# -- command lines ------------------------------------------------------------------------


def test_cli_train_sgd_and_predict(tmp_path, capsys):
    from psvm.cli import predict, train

    X, y = blobs(200)
    from sklearn.datasets import dump_svmlight_file

    data = tmp_path / "train.txt"
    dump_svmlight_file(X + 10, y * 2 - 1, str(data), zero_based=False)
    model = tmp_path / "m.model"
    assert (
        train.main(
            [
                "--solver",
                "sgd",
                "-q",
                "--sync-every",
                "16",
                "--epochs",
                "3",
                "--lambda",
                "1e-3",
                str(data),
                str(model),
            ]
        )
        == 0
    )
    assert is_linear_model_file(model)
    assert predict.main([str(data), str(model), str(tmp_path / "out")]) == 0
    acc = float(capsys.readouterr().out.split("= ")[1].split("%")[0])
    assert acc > 90
    for bad in (
        ["--solver", "sgd", "--sync-every", "x", str(data)],
        ["--solver", "sgd", "-c", "1", str(data)],
        ["--solver", "sgd", "--epochs", "0", str(data)],
        ["--solver", "cg", str(data)],
    ):
        assert train.main(bad) == 1
    err = capsys.readouterr().err
    assert "--sync-every expects an integer" in err and "unknown option -c" in err
    assert "max_iter must be >= 1" in err and "--solver cg" in err
    assert train.solver_of(["-q", "-c", "1", "--solver", "sgd", "f"]) == "sgd"
    assert train.solver_of(["-c", "--solver", "f"]) == "smo"  # '--solver' is -c's value


def test_cli_validation_file_wider_or_narrower_than_the_training_file(tmp_path, capsys):
    """--validation scores its rows as psvm-predict (LIBLINEAR) does: features the training
    file lacks are ignored, not an error; the last epoch's accuracy is psvm-predict's."""
    from sklearn.datasets import dump_svmlight_file

    from psvm.cli import predict, train

    X, y = blobs(300)
    y = y * 2 - 1
    data, model = tmp_path / "train.txt", tmp_path / "m.model"
    dump_svmlight_file(X[:200] + 10, y[:200], str(data), zero_based=False)
    for extra in (1, -1):  # the validation rows reach one feature further, or one less far
        X_val = np.hstack([X[200:] + 10, np.ones((100, 1))]) if extra > 0 else X[200:, :-1] + 10
        val = tmp_path / f"val{extra}.txt"
        dump_svmlight_file(X_val, y[200:], str(val), zero_based=False)
        argv = ["--solver", "sgd", "--epochs", "3", "--validation", str(val), str(data), str(model)]
        assert train.main(argv) == 0, capsys.readouterr().err
        last = [ln for ln in capsys.readouterr().out.splitlines() if "validation accuracy" in ln]
        scored = float(last[-1].split("validation accuracy ")[1].split("%")[0])
        assert predict.main([str(val), str(model), str(tmp_path / "out")]) == 0
        assert f"Accuracy = {scored:g}%" in capsys.readouterr().out


def test_weights_that_cannot_fit_memory_are_refused_by_name(monkeypatch):
    """A width whose weights exceed the machine's memory: one ValueError, before numpy's
    MemoryError (a traceback in the CLI) or a model of 2**31 lines."""
    import psvm.sgd.problem as problem

    monkeypatch.setattr(problem, "_physical_memory", lambda: 2**30)
    X = sp.csr_matrix(([1.0, 1.0, 1.0], ([0, 1, 2], [0, 1, 2**31 - 2])), shape=(3, 2**31 - 1))
    with pytest.raises(ValueError, match=r"X has 2147483647 features: .* 3 x 2147483647 weights"):
        SGDSVC().fit(X, [0, 1, 2])
    with pytest.raises(ValueError, match=r"needs at least 1\.5 GiB for one rank on this node, "):
        problem.check_model_memory(Comm(), 2, 2**24, "X")  # (6 arrays x 8 bytes x 2 x 2**24)
    problem.check_model_memory(Comm(), 2, 2**23, "X")  # 0.75 GiB


def test_a_refused_fit_or_partial_fit_leaves_the_model_as_it_was(monkeypatch):
    """The memory check came after classes_ was set: a refused first partial_fit left a model
    without state (the next call raised AttributeError), a refused refit new classes_ beside
    the old coef_. Now either leaves the estimator as it was, and a fit stopped in its epochs
    too."""
    import psvm.sgd.problem as problem
    import psvm.sgd.trainer as trainer

    monkeypatch.setattr(problem, "_physical_memory", lambda: 2**30)
    wide = sp.csr_matrix(([1.0, 1.0], ([0, 1], [0, 2**31 - 2])), shape=(4, 2**31 - 1))
    X, y = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 2.0], [2.0, 0.0]]), np.array([5, 6, 5, 6])
    est = SGDSVC()
    with pytest.raises(ValueError, match="weights needs at least"):
        est.partial_fit(wide, y, classes=[5, 6])
    assert not hasattr(est, "classes_")
    est.partial_fit(X, y, classes=[5, 6])  # a first call again
    fitted = SGDSVC(random_state=0).fit(X, y)
    before = {k: v.copy() for k, v in vars(fitted).items() if isinstance(v, np.ndarray)}
    predicted = fitted.predict(X)
    with pytest.raises(ValueError, match="weights needs at least"):
        fitted.fit(wide, [1, 2, 3, 4])

    def stop(*args, **kwargs):
        raise MemoryError  # (as any error, or Ctrl-C, during the epochs)

    monkeypatch.setattr(trainer.SGDTrainer, "run", stop)
    with pytest.raises(MemoryError):
        fitted.fit(X * 2, y)
    assert fitted.n_features_in_ == 2 and before.keys() <= vars(fitted).keys()
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(fitted, k), v)
    np.testing.assert_array_equal(fitted.predict(X), predicted)


def test_sync_every_is_the_period_used():
    """A user's trial: ``sync_every_`` said the period asked for (10**30), not the one used,
    which the largest shard's rows bound (one sync an epoch)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    assert SGDSVC(sync_every=8, max_iter=2, tol=None).fit(X, y).sync_every_ == 8
    assert SGDSVC(sync_every=10**30, max_iter=2, tol=None).fit(X, y).sync_every_ == 60
    assert 1 <= SGDSVC(max_iter=2, tol=None).fit(X, y).sync_every_ <= 60  # 'auto'
