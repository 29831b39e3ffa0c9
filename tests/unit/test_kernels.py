"""Each numba kernel against scikit-learn's pairwise kernels."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel, sigmoid_kernel

from psvm.kernels import (
    KERNELS,
    csc_cost,
    csr_arrays,
    kernel_column,
    kernel_column_csc,
    kernel_column_dense,
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
def test_column_major_paths_are_bitwise_equal_to_csr(data, name):
    """The solver picks CSR, CSC or dense per column and rank: values must not depend on it."""
    n, d = data.shape
    indptr, indices, values = csr_arrays(data)
    Xc = data.tocsc()
    Xc.sort_indices()
    colptr, rowidx, cdata = csr_arrays(Xc)
    XT = np.ascontiguousarray(data.T.toarray())
    sq = sq_norms_of(data)
    kp = (KERNELS[name], PARAMS["gamma"], PARAMS["coef0"], PARAMS["degree"])
    rows = np.array([0, 2, 3, 8, 39], dtype=np.int64)
    for i in range(n):
        x_idx, x_val = indices[indptr[i] : indptr[i + 1]], values[indptr[i] : indptr[i + 1]]
        csr, csc, dense = (np.full(n, -7.0) for _ in range(3))
        kernel_column(x_idx, x_val, sq[i], indptr, indices, values, sq, rows, *kp,
                      np.zeros(d + 1), csr)  # fmt: skip
        kernel_column_csc(x_idx, x_val, sq[i], colptr, rowidx, cdata, sq, rows, *kp,
                          np.zeros(n), csc)  # fmt: skip
        kernel_column_dense(x_idx, x_val, sq[i], XT, sq, rows, *kp, np.zeros(n), dense)
        assert np.array_equal(csr, csc) and np.array_equal(csr, dense)
        assert (np.delete(csr, rows) == -7.0).all()
        assert csc_cost(x_idx, colptr) == sum(np.diff(colptr)[x_idx])


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_matrix_matches_sklearn(data, name):
    B = data[:7]
    K = kernel_matrix(data, B, KERNELS[name], PARAMS["gamma"], PARAMS["coef0"], PARAMS["degree"])
    np.testing.assert_allclose(K, REFERENCE[name](data.toarray(), B.toarray()), atol=1e-12)


def test_single_specialization_after_use(data):
    kernel_matrix(data, data[:3], KERNELS["rbf"], 0.1, 0.0, 3)
    assert len(kernel_column.signatures) <= 1
    assert len(kernel_diag.signatures) <= 1


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_matrix_cut_to_the_support_vector_features(name):
    """Few SV features in a wide space: the columns are cut, the values are not."""
    A = sp.random(30, 5000, density=0.01, format="csr", random_state=4)
    A = sp.vstack([A, sp.csr_matrix((2, 5000))]).tocsr()  # empty rows at the end
    B = sp.random(4, 5000, density=0.002, format="csr", random_state=5)
    K = kernel_matrix(A, B, KERNELS[name], PARAMS["gamma"], PARAMS["coef0"], PARAMS["degree"])
    np.testing.assert_allclose(K, REFERENCE[name](A, B), atol=1e-12)
