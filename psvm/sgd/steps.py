"""numba kernels of the SGD linear SVM: sparse hinge steps, model packing, evaluation.

Contract for every kernel here: CSR arrays ``indptr`` (int64), ``indices``
(int32, 0-based, local rows) and ``data`` (float64); labels as int64 class
codes. A problem holds ``k`` one-vs-rest models at once (``k = 1`` for two
classes): model ``c`` treats code ``pos_code[c]`` as +1 and every other code
as -1. Model ``c`` is ``w_c = scale[c] * V[c]`` with bias ``b[c]``, so the
L2 decay ``w <- (1 - eta lambda) w`` is one multiplication and a step costs
O(nnz(row)), not O(n_features).

Averaging (Polyak-Ruppert) keeps ``S = U + csum * V`` equal to the sum of the
iterates since averaging began; a step that adds ``d`` to ``V`` subtracts
``csum * d`` from ``U`` (again O(nnz)), then adds ``scale`` to ``csum``.
"""

from __future__ import annotations

import numpy as np

from psvm.jit import njit

PEGASOS, OPTIMAL, CONSTANT, EPOCH = 0, 1, 2, 3
SCHEDULES = {"pegasos": PEGASOS, "optimal": OPTIMAL, "constant": CONSTANT, "epoch": EPOCH}

# Layout of the hyper-parameter array ``hp`` (float64).
H_LAMBDA, H_ETA0, H_T0, H_EPOCH, H_BIAS_LR, H_AVG_START = 0, 1, 2, 3, 4, 5
N_HP = 6
# Layout of the mutable step state ``st`` (float64): local steps so far, averaged iterates.
S_T, S_NAVG = 0, 1
N_ST = 2

# Renormalise V when the scale falls below this (keeps V's entries in range).
MIN_SCALE = 1e-9


def optimal_t0(lam: float) -> float:
    """scikit-learn's ``optimal_init`` for the hinge loss: eta at the first step is lambda^-1/4."""
    typw = np.sqrt(1.0 / np.sqrt(lam))
    return 1.0 / (typw * lam)


@njit(cache=True, nogil=True, inline="always")
def learning_rate(schedule, t, hp):
    """eta at local step t (1-based)."""
    lam = hp[H_LAMBDA]
    if schedule == PEGASOS:
        return 1.0 / (lam * t)
    if schedule == OPTIMAL:
        return 1.0 / (lam * (hp[H_T0] + (t - 1.0)))  # (t0 + t - 1: t0 lost where tiny)
    if schedule == EPOCH:
        return 1.0 / (lam * hp[H_EPOCH])
    return hp[H_ETA0]


@njit(cache=True, nogil=True, inline="always")
def _fold(c, V, U, csum):
    """Move csum[c] * V[c] into U[c] so that V[c] may be rewritten."""
    if csum[c] != 0.0:
        cs = csum[c]
        for j in range(V.shape[1]):
            U[c, j] += cs * V[c, j]
        csum[c] = 0.0


@njit(cache=True, nogil=True)
def sgd_steps(
    indptr,
    indices,
    data,
    codes,
    sw,
    order,
    lo,
    hi,
    schedule,
    hp,
    V,
    scale,
    b,
    U,
    csum,
    bsum,
    pos_code,
    pos_w,
    neg_w,
    st,
):
    """SGD on the hinge-loss primal over local rows ``order[lo:hi]``, for all k models.

    Per row x with label y = +-1, weight w_y (``sw`` times ``pos_w``/``neg_w``)
    and eta from the schedule: the margin uses the current w, then
    ``w <- max(0, 1 - eta lambda) w`` and, if ``y (w.x + b) < 1``,
    ``w += eta w_y y x`` and ``b += H_BIAS_LR * eta w_y y``.
    Averaging starts at local step ``hp[H_AVG_START]`` (0: never). Updates
    every array in place; ``st`` carries the step counters between calls.
    """
    k, d = V.shape
    lam = hp[H_LAMBDA]
    bias_lr = hp[H_BIAS_LR]
    avg_start = hp[H_AVG_START]
    t = st[S_T]
    for pos in range(lo, hi):
        i = order[pos]
        t += 1.0
        eta = learning_rate(schedule, t, hp)
        decay = 1.0 - eta * lam
        avg_on = avg_start > 0.0 and t >= avg_start
        a_t = t - avg_start + 1.0
        r0, r1 = indptr[i], indptr[i + 1]
        for c in range(k):
            if codes[i] == pos_code[c]:
                yc, wc = 1.0, sw[i] * pos_w[c]
            else:
                yc, wc = -1.0, sw[i] * neg_w[c]
            dot = 0.0
            for p in range(r0, r1):
                dot += V[c, indices[p]] * data[p]
            margin = yc * (scale[c] * dot + b[c])
            if decay <= 0.0:  # eta lambda >= 1: the decay zeroes w
                _fold(c, V, U, csum)
                V[c, :] = 0.0
                scale[c] = 1.0
            else:
                scale[c] *= decay
                if scale[c] < MIN_SCALE:
                    _fold(c, V, U, csum)
                    for j in range(d):
                        V[c, j] *= scale[c]
                    scale[c] = 1.0
            if margin < 1.0 and wc != 0.0:
                g = eta * wc * yc
                coef = g / scale[c]
                if avg_on:
                    ucoef = csum[c] * coef
                    for p in range(r0, r1):
                        V[c, indices[p]] += coef * data[p]
                        U[c, indices[p]] -= ucoef * data[p]
                else:
                    for p in range(r0, r1):
                        V[c, indices[p]] += coef * data[p]
                b[c] += bias_lr * g
            if avg_on:
                csum[c] += a_t * scale[c]
                bsum[c] += a_t * b[c]
        if avg_on:
            st[S_NAVG] += a_t
    st[S_T] = t


@njit(cache=True, nogil=True)
def pack_model(V, scale, b, weight, buf):
    """buf = weight * [w_0, ..., w_{k-1}, b, 1]: one rank's share of a weighted average."""
    k, d = V.shape
    for c in range(k):
        s = weight * scale[c]
        for j in range(d):
            buf[c * d + j] = s * V[c, j]
        buf[k * d + c] = weight * b[c]
    buf[k * (d + 1)] = weight


@njit(cache=True, nogil=True)
def unpack_model(buf, V, scale, b, U, csum):
    """Install the summed ``buf`` (see pack_model) as the model: w = sum / total weight.

    With zero total weight (no rank stepped) the models are left alone: they
    are still the last agreed ones. Averaging sums are folded first, so they
    stay exact across the replacement of V.
    """
    k, d = V.shape
    total = buf[k * (d + 1)]
    if total <= 0.0:
        return
    for c in range(k):
        _fold(c, V, U, csum)
        for j in range(d):
            V[c, j] = buf[c * d + j] / total
        scale[c] = 1.0
        b[c] = buf[k * d + c] / total


@njit(cache=True, nogil=True)
def pack_average(V, U, csum, bsum, navg, buf):
    """buf = [sum of iterates (k*d), sum of biases (k), number of iterates]."""
    k, d = V.shape
    for c in range(k):
        cs = csum[c]
        for j in range(d):
            buf[c * d + j] = U[c, j] + cs * V[c, j]
        buf[k * d + c] = bsum[c]
    buf[k * (d + 1)] = navg


@njit(cache=True, nogil=True)
def unpack_weights(buf, W, w0):
    """W[c] = buf[c*d:(c+1)*d] / total and w0[c] = bias / total (see pack_model)."""
    k, d = W.shape
    total = buf[k * (d + 1)]
    inv = 1.0 / total if total > 0.0 else 0.0
    for c in range(k):
        for j in range(d):
            W[c, j] = buf[c * d + j] * inv
        w0[c] = buf[k * d + c] * inv


@njit(cache=True, nogil=True)
def hinge_sums(indptr, indices, data, codes, sw, W, w0, pos_code, pos_w, neg_w, out):
    """out[c] = sum over rows of weight * max(0, 1 - y (W[c].x + w0[c])), for each model c."""
    k = W.shape[0]
    for c in range(k):
        out[c] = 0.0
    for i in range(indptr.size - 1):
        for c in range(k):
            if codes[i] == pos_code[c]:
                yc, wc = 1.0, sw[i] * pos_w[c]
            else:
                yc, wc = -1.0, sw[i] * neg_w[c]
            dot = w0[c]
            for p in range(indptr[i], indptr[i + 1]):
                dot += W[c, indices[p]] * data[p]
            loss = 1.0 - yc * dot
            if loss > 0.0:
                out[c] += wc * loss


@njit(cache=True, nogil=True)
def count_correct(indptr, indices, data, codes, weights, W, w0, pos_code):
    """The weight of the rows whose predicted code equals ``codes`` (sign for k = 1, else
    argmax, OvR): scikit-learn's ``score`` with ``sample_weight``, before the division."""
    k = W.shape[0]
    correct = 0.0
    for i in range(indptr.size - 1):
        best, best_c = -np.inf, 0
        for c in range(k):
            dot = w0[c]
            for p in range(indptr[i], indptr[i + 1]):
                dot += W[c, indices[p]] * data[p]
            if dot > best:
                best, best_c = dot, c
        if k == 1:
            pred = pos_code[0] if best > 0.0 else 1 - pos_code[0]
        else:
            pred = pos_code[best_c]
        if pred == codes[i]:
            correct += weights[i]
    return correct
