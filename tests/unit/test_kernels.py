"""Each numba kernel against scikit-learn's pairwise kernels."""

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel, sigmoid_kernel

import psvm.kernels as pk
import psvm.kernels.csr as pk_csr
import psvm.kernels.sums as pk_sums
from psvm._params import KERNELS
from psvm.kernels import (
    column_csr,
    csc_cost,
    csr_arrays,
    kernel_matrix,
    kernel_sums,
    take_rows,
    transpose_csr,
)
from psvm.svc.columns import THREAD_WORK, LocalKernel, _parts, kernel_column
from psvm.svc.packets import ROW, pack, pair_pre
from psvm.svc.state import dense_csr, row_sums

PARAMS = dict(gamma=0.3, coef0=0.7, degree=3)
REFERENCE = {
    "linear": lambda A, B: linear_kernel(A, B),
    "rbf": lambda A, B: rbf_kernel(A, B, gamma=PARAMS["gamma"]),
    "poly": lambda A, B: polynomial_kernel(A, B, **PARAMS),
    "sigmoid": lambda A, B: sigmoid_kernel(A, B, gamma=PARAMS["gamma"], coef0=PARAMS["coef0"]),
}


def kparams(name):
    return (KERNELS[name], PARAMS["gamma"], PARAMS["coef0"], PARAMS["degree"])


def row(X, i):
    s, e = X.indptr[i], X.indptr[i + 1]
    return X.indices[s:e].astype(np.int32), X.data[s:e]


W = 25  # packet row slots: the data's width


def packet(K, i):
    """Row i's candidate packet, as the solver sends it."""
    buf = np.zeros(ROW + 2 * W)
    n = K.n
    ones, rows = np.ones(n), np.arange(n, dtype=np.int64)
    pack(
        buf,
        0.0,
        i,
        True,
        W,
        rows,  # global variable indices
        rows,  # their local rows
        ones,
        ones,
        ones,
        ones,
        ones,
        rows,  # the rows' global rows
        K.sq,
        K.indptr,
        K.indices,
        K.data,
    )
    return buf


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    A = sp.random(40, 25, density=0.3, random_state=1, format="csr")
    A.data = rng.normal(size=A.data.size)
    A[3] = 0  # an empty row
    A.eliminate_zeros()
    return A


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_column_pair_and_diag_match_sklearn(data, name):
    K = LocalKernel(data, kparams(name))
    ref = REFERENCE[name](data.toarray(), data.toarray())
    rows = np.arange(data.shape[0], dtype=np.int64)
    for i in (0, 3, 17):
        out = np.full(data.shape[0], np.nan)
        K.column(*row(data, i), K.sq[i], rows, out)
        np.testing.assert_allclose(out, ref[i], rtol=1e-12, atol=1e-12)
        assert not K.work.any(), "work vector must be zeroed again"
        for j in (0, 3, 5):  # the solver's K_ij from two packets is the column entry, bitwise
            pre = pair_pre(packet(K, i), packet(K, j), W, K.work, *kparams(name))
            assert pk.from_pre(K.kid, np.array([pre]))[0] == out[j]
            assert not K.work.any()
    np.testing.assert_allclose(K.diag, np.diag(ref), rtol=1e-12, atol=1e-12)


def test_column_of_a_subset_is_compact(data):
    K = LocalKernel(data, kparams("rbf"))
    full = K.column(*row(data, 0), K.sq[0], np.arange(40), np.empty(40)).copy()
    out = np.full(data.shape[0], -7.0)
    rows = np.array([1, 5, 9], dtype=np.int64)
    K.column(*row(data, 0), K.sq[0], rows, out)
    assert (out[:3] == full[rows]).all() and (out[3:] == -7.0).all()


@pytest.mark.parametrize("float32", [False, True], ids=["float64", "float32 values"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_column_paths_are_bitwise_equal(data, name, float32):
    """CSR, CSC or dense is picked per column and rank: values must not depend on it.
    Values that are all float32 take a float32 dense copy: the same bits again."""
    if float32:
        data = data.copy()
        data.data = np.round(data.data * 8) / 8  # 3 bits after the point: exact in float32
    n = data.shape[0]
    wide = LocalKernel(data, kparams(name))  # small and 30% dense: both copies
    assert wide.XT is not None and wide.colptr is not None
    assert wide.XT.dtype == (np.float32 if float32 else np.float64)
    wide.XT = None  # CSC only
    narrow = LocalKernel(data, kparams(name))
    narrow.colptr = None  # dense only
    for rows in (np.array([0, 2, 3, 8, 39]), np.arange(n)):
        for i in range(n):
            x = row(data, i)
            a, b, c = (np.full(n, -7.0) for _ in range(3))
            wide.column(*x, wide.sq[i], rows, a, csr_work=10**9)  # CSC
            narrow.column(*x, wide.sq[i], rows, b, csr_work=10**9)  # dense
            wide.column(*x, wide.sq[i], rows, c, csr_work=0)  # CSR
            assert np.array_equal(a, b) and np.array_equal(a, c)
            assert (a[rows.size :] == -7.0).all()
            assert csc_cost(x[0], wide.colptr) == sum(np.diff(wide.colptr)[x[0]])


def test_exp_is_within_an_ulp_and_the_same_in_every_lane():
    """psvm's exp (rbf's from_pre) against libm's (math.exp: numpy's may differ by an ulp on
    other CPUs): within 1 ulp on [-708, 709], 0 below, exp(709) above, NaN for NaN; each
    value's bits the same at any offset in the buffer (vectorised body or scalar remainder),
    so that a kernel value does not depend on where it is computed."""
    x = np.concatenate([np.linspace(-760.0, 709.0, 200_003), [-708.0, -707.9, 0.0, -0.0, 1e-300]])
    got = pk.from_pre_flat(pk.RBF, x.copy())
    inside = x >= -708.0
    ref = np.array([math.exp(v) for v in x[inside]])
    assert np.all(np.abs(got[inside] - ref) <= np.spacing(ref))
    assert np.all(got[~inside] == 0.0)
    edges = pk.from_pre_flat(pk.RBF, np.array([np.inf, 1e300, 710.0, -np.inf, -1e300, np.nan]))
    assert np.all(edges[:3] == got[x == 709.0][0]) and np.all(edges[3:5] == 0.0)
    assert np.isnan(edges[5])
    for offset in (1, 3):
        shifted = pk.from_pre_flat(pk.RBF, x[offset:].copy())
        assert np.array_equal(shifted.view(np.int64), got[offset:].view(np.int64))
    one_by_one = [pk.from_pre_flat(pk.RBF, x[i : i + 1].copy())[0] for i in range(0, x.size, 997)]
    assert np.array_equal(np.array(one_by_one).view(np.int64), got[::997].view(np.int64))


def test_rbf_table_gives_exp_bits(data, monkeypatch):
    """Rows of integers (0/1 features, counts) take rbf's exp from a table of the few values
    -gamma * n it sees: columns, reconstruction sums and decision values (their dot products
    in integers) keep exp's bits. Rows that are not integers, or a column of one, take exp
    itself."""
    ints = data.copy()
    ints.data = np.round(ints.data * 2)  # -4..4, some zeros (stored)
    n, rows = ints.shape[0], np.arange(ints.shape[0], dtype=np.int64)
    K = LocalKernel(ints, kparams("rbf"))
    assert K.integral and K.table.size == 4 * K.sq.max() + 1
    assert LocalKernel(data, kparams("rbf")).table.size == 0
    plain = LocalKernel(ints, kparams("rbf"))
    plain.table = np.zeros(0)
    for i in range(n):
        x = row(ints, i)
        a, b = np.empty(n), np.empty(n)
        K.column(*x, K.sq[i], rows, a)
        plain.column(*x, K.sq[i], rows, b)
        assert np.array_equal(a, b)
    arrays, (kid, gamma, coef0, degree, has_dense, *_) = K.engine_arrays()
    assert has_dense and arrays[13].dtype == np.int8  # the dense copy: int8
    dense = (kid, gamma, coef0, degree, True, False, 1)  # columns by column_table
    some = np.array([1, 4, 5, 9, 30], dtype=np.int64)
    for i in range(n):
        x = row(ints, i)
        for r in (rows, some):
            a, b = np.empty(r.size), np.empty(r.size)
            kernel_column(arrays, dense, *x, K.sq[i], r, a, 10**9)
            plain.column(*x, K.sq[i], r, b)
            assert np.array_equal(a, b)
    x = row(data, 5)  # a column of non-integers against the integer rows: exp itself
    a, b = np.empty(n), np.empty(n)
    K.column(*x, LocalKernel(data, kparams("rbf")).sq[5], rows, a)
    plain.column(*x, LocalKernel(data, kparams("rbf")).sq[5], rows, b)
    assert np.array_equal(a, b)
    F = csr_arrays(ints[::3])
    f_sq = pk.sq_norms_of(ints[::3])
    coef = np.random.default_rng(2).normal(size=F[0].size - 1)
    arrays = (*F, f_sq, coef, K.indptr, K.indices, K.data, K.sq, rows, kparams("rbf"))
    assert pk_sums._sums_table(pk.RBF, PARAMS["gamma"], K.sq, (*F, f_sq), True).size
    assert np.array_equal(kernel_sums(*arrays, True), kernel_sums(*arrays, False))
    coefs, rho = np.vstack([coef, -coef]), np.array([0.1, -0.2])
    model = (ints, ints[::3], coefs, rho, kparams("rbf"))
    with_table = pk.decision_values(*model)
    monkeypatch.setattr(pk_sums, "EXP_TABLE_MAX", 0)  # no table
    assert np.array_equal(with_table, pk.decision_values(*model))


def test_rows_of_integers_on_every_rank_need_no_csc_copy():
    """When every rank's rows are integers (``sq_max``: the largest norm of them all), the
    rbf table covers the column of any training row, so the int8 dense copy serves every
    column and no CSC copy is built, also for a window; columns keep their bits."""
    X = sp.random(80, 60, density=0.08, random_state=3, format="csr")
    X.data = np.ceil(X.data * 3)  # 1..3
    arrays = csr_arrays(X)
    local = LocalKernel.of_arrays(*arrays, X.shape[1], kparams("rbf"))
    assert local.colptr is not None and local.XT.dtype == np.int8  # sparse: both copies
    sq_max = local.sq.max() + 5  # another rank's row is longer
    whole = LocalKernel.of_arrays(*arrays, X.shape[1], kparams("rbf"), sq_max=sq_max)
    assert whole.table.size == 4 * sq_max + 1 and whole.colptr is None
    half = np.arange(0, 80, 2, dtype=np.int64)
    window = LocalKernel.of_csr(whole, take_rows(*arrays, half), whole.sq[half], whole.diag[half])
    assert window.colptr is None and window.table is whole.table
    rows = np.arange(80, dtype=np.int64)
    for i in range(80):
        a, b = np.empty(80), np.empty(80)
        whole.column(*row(X, i), whole.sq[i], rows, a)
        local.column(*row(X, i), local.sq[i], rows, b)
        assert np.array_equal(a, b)


@pytest.mark.parametrize(
    "name, values",
    [("rbf", "float64"), ("rbf", "float32"), ("rbf", "integers"), ("poly", "float64")],
)
def test_columns_in_threads_have_the_bits_of_one_thread(name, values):
    """A large dense column runs in threads, each on whole blocks of rows: every value has
    the bits of one thread's column, for any count of parts (an uneven last block too), and
    nothing is written past the window's rows (a cache's part column is longer); a column of
    part of the rows (a window's rejoined rows) stays in one thread."""
    rng = np.random.default_rng(4)
    d = 12  # rows enough for kernel_column to take threads (an uneven last block)
    n = (3 if values == "integers" else 1) * THREAD_WORK + 77
    X = rng.normal(size=(n, d))
    if values != "float64":
        X = np.round(X * (1 if values == "integers" else 8)) / (1 if values == "integers" else 8)
    K = LocalKernel(sp.csr_matrix(X), kparams(name))
    assert K.XT.dtype == {"float64": np.float64, "float32": np.float32, "integers": np.int8}[values]
    arrays, params = K.engine_arrays()
    arrays = (*arrays[:14], np.empty(3 * pk.DENSE_BLOCK, np.int16))  # scratch of three ranges
    rows, some = np.arange(n, dtype=np.int64), np.array([3, 1500, n - 1], dtype=np.int64)
    assert n % pk.DENSE_BLOCK
    one = (*params[:6], 1)
    many = (*params[:6], 3)
    for i in (0, 17, n - 1):
        x = row(sp.csr_matrix(X), i)
        work = x[0].size * n // (16 if values == "integers" else 4) + n
        assert _parts(work, 3, True, n) == 3  # kernel_column below takes three threads
        a, b = np.empty(n), np.empty(n)
        kernel_column(arrays, one, *x, K.sq[i], rows, a, 10**9)
        for parts in (2, 3, 4):  # the two paths, as kernel_column calls them with ``parts``
            b[:] = -7.0
            if values == "integers":
                scratch = np.empty(parts * pk.DENSE_BLOCK, dtype=np.int16)
                pk.table_column_threads(*x, K.sq[i], K.XT, K.sq, K.table, scratch, b, parts)
            else:
                pk.dense_column_threads(*x, K.sq[i], K.XT, K.sq, *kparams(name), b, parts)
            assert np.array_equal(a.view(np.int64), b.view(np.int64))
        longer = np.full(n + 5000, -7.0)
        kernel_column(arrays, many, *x, K.sq[i], rows, longer, 10**9)
        assert np.array_equal(a.view(np.int64), longer[:n].view(np.int64))
        assert (longer[n:] == -7.0).all()
        c = np.full(n, -7.0)
        kernel_column(arrays, many, *x, K.sq[i], some, c, 10**9)
        assert np.array_equal(c[:3], a[some]) and (c[3:] == -7.0).all()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_weighted_sums_equal_column_sums(data, name):
    """sum_s c_s K(f_s, x_r), in blocks and chunks, adds the column entries in eight lanes
    (s mod 8, each in order of s), then the lanes pairwise: the same bits every way."""
    K = LocalKernel(data, kparams(name))
    n = data.shape[0]
    picks = [7, 2, 30, 3, 11, 0, 5, 8, 13, 21, 34, 1, 4, 9, 16, 25, 36, 6, 19]
    F = data[picks]
    coef = np.linspace(-1.5, 2.0, len(picks))
    rows = np.array([38, 0, 3, 9, 4, 17, 22, 29, 31, 12, 5, 27], dtype=np.int64)  # 8-row chunks
    cols = np.empty((F.shape[0], n))
    for s in range(F.shape[0]):
        K.column(*row(F, s), K.sq[picks[s]], np.arange(n), cols[s])
    lanes = np.zeros((8, rows.size))
    for s in range(F.shape[0]):
        lanes[s % 8] += coef[s] * cols[s, rows]
    want = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + (
        (lanes[4] + lanes[5]) + (lanes[6] + lanes[7])
    )
    for few in (0, 100):  # kernel_sums, then epoch_sums
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("psvm.svc.columns._FEW_ROWS", few)
            np.testing.assert_array_equal(K.sums(csr_arrays(F), coef, rows), want)
    # tiny super-blocks of rows and chunks of F, or whole ones, in threads or in this thread:
    # the same bits
    for (lane_limit, tile), parallel in itertools.product(
        ((16, 30), (1 << 22, 1 << 17)), (0, 1 << 62)
    ):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(pk_sums, "_LANE_LIMIT", lane_limit)
            mp.setattr(pk_sums, "_FT_TILE", tile)
            mp.setattr(pk_sums, "_PARALLEL_SUMS", parallel)
            got = kernel_sums(
                *csr_arrays(F),
                K.sq[picks],
                coef,
                K.indptr,
                K.indices,
                K.data,
                K.sq,
                rows,
                kparams(name),
            )
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("integers", [False, True], ids=["float values", "integer values"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_epoch_sums_are_the_sums_of_each_epoch(data, name, integers):
    """Stale rows of several departures, interleaved, in one call: each row gets the bits of
    LocalKernel.sums over the rows that moved since its departure (either path of sums; with
    integer values, rbf's sums of many rows read exp from a table)."""
    if integers:
        data = data.copy()
        data.data = np.round(4 * data.data)
    K = LocalKernel(data, kparams(name))
    assert (K.table.size > 0) == (integers and name == "rbf")
    picks = [7, 2, 30, 3, 11, 0, 5, 8, 13, 21, 34, 1, 4, 9, 16, 25, 36, 6, 19]
    F = csr_arrays(data[picks])
    coef = np.outer(np.linspace(-1.5, 2.0, len(picks)), [1.0, -0.5, 2.0])
    coef[::3, 0] = coef[1::2, 1] = 0.0  # unchanged since that departure: no term
    coef[:, 2] = 0.0  # nothing moved since the third: its rows get 0
    rows = np.arange(data.shape[0], dtype=np.int64)
    epochs = np.arange(rows.size, dtype=np.int64) % 3
    got = K.epoch_sums(F, coef, rows, epochs)
    for e in range(2):
        moved = np.flatnonzero(coef[:, e])
        for few in (0, 100):  # kernel_sums, then epoch_sums
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr("psvm.svc.columns._FEW_ROWS", few)
                want = K.sums(take_rows(*F, moved), coef[moved, e], rows[epochs == e])
            np.testing.assert_array_equal(got[epochs == e], want)
    assert not got[epochs == 2].any()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_matrix_matches_sklearn(data, name):
    B = data[:7]
    K = kernel_matrix(data, B, KERNELS[name], PARAMS["gamma"], PARAMS["coef0"], PARAMS["degree"])
    np.testing.assert_allclose(K, REFERENCE[name](data.toarray(), B.toarray()), atol=1e-12)


def test_single_specialization_after_use(data):
    kernel_matrix(data, data[:3], KERNELS["rbf"], 0.1, 0.0, 3)
    K = LocalKernel(data, kparams("rbf"))
    K.column(*row(data, 0), K.sq[0], np.arange(40), np.empty(40))
    K.column(*row(data, 0), K.sq[0], np.arange(3), np.empty(40))
    assert len(column_csr.signatures) <= 1


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_matrix_cut_to_the_support_vector_features(name):
    """Few SV features in a wide space: the columns are cut, the values are not."""
    A = sp.random(30, 5000, density=0.01, format="csr", random_state=4)
    A = sp.vstack([A, sp.csr_matrix((2, 5000))]).tocsr()  # empty rows at the end
    B = sp.random(4, 5000, density=0.002, format="csr", random_state=5)
    K = kernel_matrix(A, B, KERNELS[name], PARAMS["gamma"], PARAMS["coef0"], PARAMS["degree"])
    np.testing.assert_allclose(K, REFERENCE[name](A, B), atol=1e-12)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_decision_values_are_weighted_kernel_sums(data, name):
    """dec = coef K(SV, X)' - rho for several outputs, against scikit-learn's kernels; a
    feature no SV has counts in the RBF norm (LIBSVM), and indices near 2^31 cost nothing."""
    rng = np.random.default_rng(3)
    big = 2_000_000_000
    SV = sp.csr_matrix((data[:9].data, data[:9].indices, data[:9].indptr), shape=(9, big))
    X = sp.hstack([data, sp.csr_matrix(rng.normal(size=(40, 1)))]).tocsr()  # feature 25: no SV
    X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(40, big))
    coef, rho = rng.normal(size=(3, 9)), rng.normal(size=3)
    got = pk.decision_values(X, SV, coef, rho, kparams(name))
    ref = REFERENCE[name](X[:, :26].toarray(), SV[:, :26].toarray()) @ coef.T - rho
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(
        pk.decision_values(X[:0], SV, coef, rho, kparams(name)).shape, [0, 3]
    )
    no_sv = pk.decision_values(X, SV[:0], coef[:, :0], rho, kparams(name))
    np.testing.assert_array_equal(no_sv, np.tile(-rho, (40, 1)))
    with pytest.raises(ValueError, match=r"coef has shape \(3, 8\).*expected \(m, 9\)"):
        pk.decision_values(X, SV, coef[:, :8], rho, kparams(name))


@pytest.mark.parametrize("bare", [True, False])
def test_csr_of_is_the_matrix_scipy_builds(monkeypatch, bare):
    """csr_of's matrix has scipy's attributes and values with or without its fast path, on
    arrays it may take (int32, float64) and arrays it leaves to scipy's constructor."""
    monkeypatch.setattr(pk_csr, "_BARE_CSR", bare and pk_csr._BARE_CSR)
    X = sp.random(7, 5, density=0.4, format="csr", random_state=0)
    longer = np.append(X.indices, 3).astype(np.int32)  # past indptr[-1]: scipy prunes
    cases = [
        (X.indptr, X.indices, X.data),
        (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data),
        (X.indptr, X.indices, X.data.astype(np.float32)),
        (X.indptr, longer, np.append(X.data, 9.0)),
    ]
    for indptr, indices, data in cases:
        got = pk.csr_of(indptr, indices, data, (7, 5))
        want = sp.csr_matrix((data, indices.astype(np.int32), indptr.astype(np.int32)), (7, 5))
        assert type(got) is sp.csr_matrix and list(vars(got)) == list(vars(want))
        assert got.shape == want.shape and got.dtype == want.dtype and got.nnz == want.nnz
        assert got.indices.dtype == got.indptr.dtype == np.int32
        np.testing.assert_array_equal(got.toarray(), want.toarray())
    if pk_csr._BARE_CSR:  # the fast path keeps the arrays themselves
        kept = pk.csr_of(X.indptr, X.indices, X.data, (7, 5))
        assert kept.data is X.data and kept.indices is X.indices and kept.indptr is X.indptr
    empty = pk.csr_of(np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0), (0, 3))
    assert empty.shape == (0, 3) and empty.nnz == 0


@pytest.mark.parametrize("n", [None, 3])
def test_the_compiled_csr_helpers_match_scipy(n):
    """take_rows, transpose_csr, row_sums and dense_csr (Python allocates, numba fills)."""
    rng = np.random.default_rng(0)
    dense = rng.random((40, 7)) * (rng.random((40, 7)) < 0.4)
    X = sp.csr_matrix(dense)
    rows = rng.permutation(40)[:n].astype(np.int64)
    got = sp.csr_matrix(take_rows(*csr_arrays(X), rows)[::-1], shape=(rows.size, 7))
    assert (got != X[rows]).nnz == 0
    colptr, rowidx, cdata = transpose_csr(*csr_arrays(X), 7)
    csc = X.tocsc()
    assert np.array_equal(colptr, csc.indptr) and np.array_equal(rowidx, csc.indices)
    assert np.array_equal(cdata, csc.data)
    total, square = row_sums(*csr_arrays(X)[::2])
    rows_of = np.repeat(np.arange(40), np.diff(X.indptr))
    assert np.array_equal(total, np.bincount(rows_of, X.data, 40))
    assert np.allclose(square, (dense**2).sum(1))
    data, indices, indptr = dense_csr(dense)
    assert np.array_equal(data, X.data) and np.array_equal(indices, X.indices)
    assert np.array_equal(indptr, X.indptr)
