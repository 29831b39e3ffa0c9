"""numba reductions over a shard's dual state (bias and objective terms)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def bias_terms(y, alpha, C, G):
    """Local parts of LIBSVM's rho: (ub, lb, sum of y_t G_t over free t, number free)."""
    ub, lb, s, n_free = np.inf, -np.inf, 0.0, 0
    for t in range(y.size):
        yg = y[t] * G[t]
        if alpha[t] >= C[t]:
            if y[t] < 0:
                ub = min(ub, yg)
            else:
                lb = max(lb, yg)
        elif alpha[t] <= 0.0:
            if y[t] > 0:
                ub = min(ub, yg)
            else:
                lb = max(lb, yg)
        else:
            n_free += 1
            s += yg
    return ub, lb, s, n_free


@njit(cache=True, nogil=True)
def dual_objective_terms(alpha, G):
    """sum_t a_t (G_t - 1): twice the local share of 1/2 a'Qa - e'a."""
    s = 0.0
    for t in range(alpha.size):
        s += alpha[t] * (G[t] - 1.0)
    return s
