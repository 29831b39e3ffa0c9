"""Each numba kernel against scikit-learn's pairwise kernels."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel, sigmoid_kernel

from psvm.kernels import (
    KERNELS,
    csr_arrays,
    kernel_column,
    kernel_diag,
    kernel_matrix,
    sq_norms_of,
)

PARAMS = dict(gamma=0.3, coef0=0.7, degree=3)
REFERENCE = {
    "linear": lambda A, B: linear_kernel(A, B),
    "rbf": lambda A, B: rbf_kernel(A, B, gamma=PARAMS["gamma"]),
    "poly": lambda A, B: polynomial_kernel(A, B, **PARAMS),
    "sigmoid": lambda A, B: sigmoid_kernel(A, B, gamma=PARAMS["gamma"], coef0=PARAMS["coef0"]),
}


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    A = sp.random(40, 25, density=0.3, random_state=1, format="csr")
    A.data = rng.normal(size=A.data.size)
    A[3] = 0  # an empty row
    A.eliminate_zeros()
    return A


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_column_and_diag_match_sklearn(data, name):
    kid = KERNELS[name]
    indptr, indices, values = csr_arrays(data)
    sq = sq_norms_of(data)
    ref = REFERENCE[name](data.toarray(), data.toarray())
    rows = np.arange(data.shape[0], dtype=np.int64)
    work = np.zeros(data.shape[1] + 1)
    for i in (0, 3, 17):
        s, e = indptr[i], indptr[i + 1]
        out = np.full(data.shape[0], np.nan)
        kp = (kid, PARAMS["gamma"], PARAMS["coef0"], PARAMS["degree"])
        kernel_column(indices[s:e], values[s:e], sq[i], indptr, indices, values, sq, rows,
                      *kp, work, out)  # fmt: skip
        np.testing.assert_allclose(out, ref[i], rtol=1e-12, atol=1e-12)
        assert not work.any(), "work vector must be zeroed again"
    diag = kernel_diag(indptr, values, sq, kid, PARAMS["gamma"], PARAMS["coef0"],
                       PARAMS["degree"], np.empty(data.shape[0]))  # fmt: skip
    np.testing.assert_allclose(diag, np.diag(ref), rtol=1e-12, atol=1e-12)


def test_column_only_touches_given_rows(data):
    indptr, indices, values = csr_arrays(data)
    sq = sq_norms_of(data)
    out = np.full(data.shape[0], -7.0)
    rows = np.array([1, 5, 9], dtype=np.int64)
    kernel_column(indices[:2], values[:2], 1.0, indptr, indices, values, sq, rows,
                  KERNELS["rbf"], 0.3, 0.0, 3, np.zeros(26), out)  # fmt: skip
    assert (np.delete(out, rows) == -7.0).all()
    assert (out[rows] != -7.0).all()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_matrix_matches_sklearn(data, name):
    B = data[:7]
    K = kernel_matrix(data, B, KERNELS[name], PARAMS["gamma"], PARAMS["coef0"], PARAMS["degree"])
    np.testing.assert_allclose(K, REFERENCE[name](data.toarray(), B.toarray()), atol=1e-12)


def test_single_specialization_after_use(data):
    kernel_matrix(data, data[:3], KERNELS["rbf"], 0.1, 0.0, 3)
    assert len(kernel_column.signatures) <= 1
    assert len(kernel_diag.signatures) <= 1
