"""Probability estimates, as LIBSVM's ``-b 1``: Platt's sigmoid per class pair, fitted on
decision values of a 5-fold internal cross-validation, and pairwise coupling; one-class
SVM's density marks (LIBSVM 3.3x).

Transcribed from LIBSVM 3.24's svm.cpp (``sigmoid_train``, ``sigmoid_predict``,
``multiclass_probability``, ``svm_binary_svc_probability``, ``svm_predict_probability``).
One difference: the folds' shuffle is numpy's seeded generator (as ``-v``'s), not C's
``rand()``, so psvm's probA/probB differ from LIBSVM's by what other folds give; with the
same folds they agree (tests/unit/test_probability.py). This module is the arithmetic;
the internal cross-validation that feeds ``sigmoid_train`` is :mod:`psvm.svc.platt`.
"""

from __future__ import annotations

import math

import numpy as np

from psvm.jit import inner, njit

MIN_PROB = 1e-7  # svm_predict_probability's clip of the pairwise probabilities
N_MARKS = 10  # LIBSVM's nr_marks: one-class density bins


def sigmoid_train(dec: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """LIBSVM's ``sigmoid_train`` (Platt's method as improved by Lin, Lin and Weng): A, B
    minimising the log loss of ``1 / (1 + exp(A f + B))`` on the prior-corrected targets,
    by Newton's method with backtracking. ``labels`` > 0 is the positive class."""
    return _sigmoid_train(np.ascontiguousarray(dec, np.float64), np.asarray(labels) > 0)


@njit(cache=True, nogil=True)
def _sigmoid_train(dec, pos):
    n = dec.size
    prior1 = 0.0
    for i in range(n):
        prior1 += 1.0 if pos[i] else 0.0
    prior0 = n - prior1
    max_iter, min_step, sigma, eps = 100, 1e-10, 1e-12, 1e-5
    hi, lo = (prior1 + 1.0) / (prior1 + 2.0), 1.0 / (prior0 + 2.0)
    t = np.empty(n)
    A, B = 0.0, math.log((prior0 + 1.0) / (prior1 + 1.0))
    fval = 0.0
    for i in range(n):
        t[i] = hi if pos[i] else lo
        f = dec[i] * A + B
        if f >= 0:
            fval += t[i] * f + math.log(1 + math.exp(-f))
        else:
            fval += (t[i] - 1) * f + math.log(1 + math.exp(f))
    for _ in range(max_iter):
        h11, h22, h21, g1, g2 = sigma, sigma, 0.0, 0.0, 0.0
        for i in range(n):
            f = dec[i] * A + B
            if f >= 0:
                p = math.exp(-f) / (1.0 + math.exp(-f))
                q = 1.0 / (1.0 + math.exp(-f))
            else:
                p = 1.0 / (1.0 + math.exp(f))
                q = math.exp(f) / (1.0 + math.exp(f))
            d2 = p * q
            h11 += dec[i] * dec[i] * d2
            h22 += d2
            h21 += dec[i] * d2
            d1 = t[i] - p
            g1 += dec[i] * d1
            g2 += d1
        if abs(g1) < eps and abs(g2) < eps:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= min_step:
            newA, newB = A + step * dA, B + step * dB
            newf = 0.0
            for i in range(n):
                f = dec[i] * newA + newB
                if f >= 0:
                    newf += t[i] * f + math.log(1 + math.exp(-f))
                else:
                    newf += (t[i] - 1) * f + math.log(1 + math.exp(f))
            if newf < fval + 0.0001 * step * gd:
                A, B, fval = newA, newB, newf
                break
            step = step / 2.0
        if step < min_step:  # LIBSVM: "Line search fails in two-class probability estimates"
            break
    return A, B


def sigmoid_predict(dec: np.ndarray, A: float, B: float) -> np.ndarray:
    """LIBSVM's ``sigmoid_predict``: 1 / (1 + exp(A f + B)), written to avoid cancellation."""
    f = np.asarray(dec, dtype=np.float64) * A + B
    e = np.exp(-np.abs(f))
    return np.where(f >= 0, e / (1.0 + e), 1.0 / (1.0 + np.exp(np.minimum(f, 0.0))))


@inner
def _coupling(r, p):
    """LIBSVM's ``multiclass_probability`` (method 2 of Wu, Lin and Weng) for one row:
    r[i, j] = P(i | i or j), out p (sums to 1)."""
    k = r.shape[0]
    max_iter, eps = max(100, k), 0.005 / k
    Q = np.empty((k, k))
    Qp = np.empty(k)
    for t in range(k):
        p[t] = 1.0 / k
        Q[t, t] = 0.0
        for j in range(t):
            Q[t, t] += r[j, t] * r[j, t]
            Q[t, j] = Q[j, t]
        for j in range(t + 1, k):
            Q[t, t] += r[j, t] * r[j, t]
            Q[t, j] = -r[j, t] * r[t, j]
    for _ in range(max_iter):
        pQp = 0.0
        for t in range(k):
            Qp[t] = 0.0
            for j in range(k):
                Qp[t] += Q[t, j] * p[j]
            pQp += p[t] * Qp[t]
        max_error = 0.0
        for t in range(k):
            max_error = max(max_error, abs(Qp[t] - pQp))
        if max_error < eps:
            break
        for t in range(k):
            diff = (-Qp[t] + pQp) / Q[t, t]
            p[t] += diff
            pQp = (pQp + diff * (diff * Q[t, t] + 2 * Qp[t])) / (1 + diff) / (1 + diff)
            for j in range(k):
                Qp[j] = (Qp[j] + diff * Q[t, j]) / (1 + diff)
                p[j] /= 1 + diff


@njit(cache=True, nogil=True)
def _couple_rows(pairwise, k, out):
    r = np.empty((k, k))
    for row in range(pairwise.shape[0]):
        if k == 2:  # LIBSVM 3.24: the pair's probability as it is, no coupling iterations
            out[row, 0] = pairwise[row, 0]
            out[row, 1] = 1 - pairwise[row, 0]
            continue
        q = 0
        for i in range(k):
            for j in range(i + 1, k):
                r[i, j] = pairwise[row, q]
                r[j, i] = 1 - pairwise[row, q]
                q += 1
        _coupling(r, out[row])


def pairwise_coupling(dec: np.ndarray, probA, probB, k: int) -> np.ndarray:
    """LIBSVM's ``svm_predict_probability``: class probabilities (n, k) from one-vs-one
    decision values (n, k (k - 1) / 2), in the model's class order. Two classes take the
    sigmoid as it is (LIBSVM 3.24; scikit-learn's older copy couples them too, which moves
    them by up to about 0.003)."""
    A, B = np.asarray(probA, dtype=np.float64), np.asarray(probB, dtype=np.float64)
    pairwise = np.clip(sigmoid_predict(dec, A, B), MIN_PROB, 1 - MIN_PROB)
    out = np.empty((dec.shape[0], k))
    _couple_rows(np.ascontiguousarray(pairwise), k, out)
    return out


# -- one-class SVM: density marks (LIBSVM 3.3x) ------------------------------------------


def density_marks(dec: np.ndarray) -> np.ndarray | None:
    """LIBSVM 3.3x's ``svm_one_class_probability`` (Que and Lin's binning): 10 marks that
    cut the training rows' decision values into bins, 5 of the negative values and 5 of
    the non-negative ones, each holding about as many rows; None when either side has
    fewer than 5 rows (LIBSVM then warns and writes no marks)."""
    dec = np.sort(np.asarray(dec, dtype=np.float64))
    n, mid = dec.size, N_MARKS // 2
    nonneg = np.flatnonzero(dec >= 0)
    n_neg = int(nonneg[0]) if nonneg.size else 0  # LIBSVM's neg_counter: 0 if none is >= 0
    n_pos = n - n_neg
    if n_neg < mid or n_pos < mid:
        return None
    edges = np.empty(N_MARKS + 1)
    edges[:mid] = dec[np.arange(mid) * n_neg // mid]
    edges[mid] = 0.0
    edges[mid + 1 :] = dec[n_neg - 1 + np.arange(1, mid + 1) * n_pos // mid]
    return (edges[:-1] + edges[1:]) / 2


def one_class_probability(dec: np.ndarray, marks) -> np.ndarray:
    """LIBSVM's ``predict_one_class_probability``: the probability of being normal (not an
    outlier) of each decision value, i / 10 for the first mark i >= 1 above it; 0.001 below
    the first mark, 0.999 above the last, and 0 where LIBSVM's loop finds none (a value
    equal to the last mark)."""
    dec, marks = np.asarray(dec, dtype=np.float64), np.asarray(marks, dtype=np.float64)
    prob = np.zeros(dec.shape)
    undecided = np.ones(dec.shape, dtype=bool)
    for i in range(1, N_MARKS):
        hit = undecided & (dec < marks[i])
        prob[hit] = i / N_MARKS
        undecided &= ~hit
    prob[dec > marks[-1]] = 0.999
    prob[dec < marks[0]] = 0.001
    return prob


# -- training: the internal cross-validation -----------------------------------------------
