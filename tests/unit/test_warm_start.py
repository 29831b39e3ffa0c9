"""fit_ovo's alpha0: a feasible start away from 0 reaches the cold solve's optimum (the
instrument of benchmarks/bench_seed.py, which measured alpha seeding for -v)."""

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_iris
from sklearn.preprocessing import MinMaxScaler

from psvm._params import validate_svc_params
from psvm.comm import Comm
from psvm.io.shard import Shard
from psvm.svc.multiclass import fit_ovo


def _fit(alpha0=None):
    X, y = load_iris(return_X_y=True)
    X = sp.csr_matrix(MinMaxScaler().fit_transform(X))
    shard = Shard(X=X, y=y.astype(float), offset=0, n_samples=150, n_features=4, max_row_nnz=4)
    # unequal bounds per class: the start must respect each row's own C
    params = validate_svc_params(C=50.0, gamma=2.0, class_weight={1.0: 0.5}, tol=1e-5)
    model, sv = fit_ovo(Comm(), shard, params, np.array([0.0, 1.0, 2.0]), alpha0=alpha0)
    coef = np.zeros((2, 150))  # dual_coef's layout over every row
    coef[:, sv] = model.dual_coef
    return model, coef


def test_a_start_away_from_zero_reaches_the_cold_optimum():
    cold, coef = _fit()
    assert min(cold.meta["n_iter"]) > 5
    same, _ = _fit(coef)  # from its own optimum: every pair stops at once
    assert same.meta["n_iter"] == [0, 0, 0]
    half, _ = _fit(0.5 * coef)  # feasible, not optimal: solved again to the same optimum
    assert min(half.meta["n_iter"]) > 0
    np.testing.assert_allclose(half.meta["objective"], cold.meta["objective"], rtol=1e-6)
    np.testing.assert_allclose(half.rho, cold.rho, atol=1e-3)
