"""Shard helpers (pure) and load_shard on one process; MPI runs are in test_mpi_load.py."""

import pickle

import numpy as np
import pytest

from psvm.comm import Comm
from psvm.io.libsvm_format import LibsvmFormatError, read_libsvm
from psvm.io.shard import (
    Shard,
    labels_in_order,
    load_shard,
    nnz_balanced_offsets,
)


@pytest.fixture(scope="module", autouse=True)
def cache_env(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PSVM_CACHE_DIR", str(tmp_path_factory.mktemp("psvm_cache")))
        yield


def brute_force_offsets(row_nnz, size):
    """Row i goes to rank floor(size * c_i / W), c_i the weight before row i."""
    w = np.asarray(row_nnz) + 1
    W = int(w.sum())
    c = 0
    dest = []
    for wi in w:
        dest.append(c * size // W)
        c += int(wi)
    offsets = [0] * (size + 1)
    for r in range(size):
        offsets[r + 1] = offsets[r] + dest.count(r)
    return offsets


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("size", [1, 2, 3, 5, 8])
def test_nnz_balanced_offsets_rule(seed, size):
    rng = np.random.default_rng(seed)
    row_nnz = rng.integers(0, 50, size=rng.integers(0, 40)) * rng.integers(0, 2, 1)
    offsets = nnz_balanced_offsets(row_nnz, size)
    assert offsets.dtype == np.int64 and offsets.shape == (size + 1,)
    np.testing.assert_array_equal(
        offsets, brute_force_offsets(row_nnz, size) if row_nnz.size else np.zeros(size + 1)
    )
    assert np.all(np.diff(offsets) >= 0) and offsets[-1] == row_nnz.size
    # Balanced: no rank exceeds its share by more than one row.
    w = row_nnz + 1
    if w.size:
        loads = [w[offsets[r] : offsets[r + 1]].sum() for r in range(size)]
        assert max(loads) <= w.sum() / size + w.max()


def test_nnz_balanced_offsets_balances_nnz_not_rows():
    row_nnz = np.array([99] + [0] * 99)  # one heavy row, then light ones
    np.testing.assert_array_equal(nnz_balanced_offsets(row_nnz, 2), [0, 1, 100])
    np.testing.assert_array_equal(nnz_balanced_offsets(np.zeros(6, int), 3), [0, 2, 4, 6])


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_nnz_balanced_offsets_pieces_sum_to_whole(size):
    rng = np.random.default_rng(size)
    row_nnz = rng.integers(0, 30, size=57)
    whole = nnz_balanced_offsets(row_nnz, size)
    cuts = [0, 5, 5, 30, 57]  # contiguous pieces, one of them empty
    total = int((row_nnz + 1).sum())
    summed = np.zeros(size + 1, dtype=np.int64)
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        before = int((row_nnz[:a] + 1).sum())
        summed += nnz_balanced_offsets(row_nnz[a:b], size, weight_before=before, total_weight=total)
    np.testing.assert_array_equal(summed, whole)


def test_more_ranks_than_rows():
    offsets = nnz_balanced_offsets(np.array([0, 0, 0]), 5)
    assert offsets[-1] == 3 and np.count_nonzero(np.diff(offsets)) == 3


def test_labels_in_order_first_appearance():
    comm = Comm()
    np.testing.assert_array_equal(labels_in_order(comm, np.array([3.0, 1, 3, -1, 1])), [3, 1, -1])
    assert labels_in_order(comm, np.array([])).size == 0


# -- load_shard on one process -------------------------------------------------------


@pytest.mark.parametrize("balance", [True, False])
def test_load_shard_serial_equals_read(balance, shared_data):
    path = shared_data / "heart_scale.xz"
    shard = load_shard(Comm(), path, balance=balance)
    X, y = read_libsvm(path)
    assert isinstance(shard, Shard)
    assert (shard.offset, shard.n_samples, shard.n_features) == (0, 270, 13)
    assert shard.max_row_nnz == int(np.diff(X.indptr).max())
    np.testing.assert_array_equal(shard.classes, [1, -1])
    assert (shard.X != X).nnz == 0 and np.array_equal(shard.y, y)
    assert shard.X.indices.dtype == np.int32 and shard.X.data.dtype == np.float64


def test_load_shard_explicit_n_features(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"1 1:1\n2 2:1\n")
    assert load_shard(Comm(), path, n_features=10).X.shape == (2, 10)
    with pytest.raises(LibsvmFormatError, match=r"f.txt:2: feature index 2 exceeds n_features=1"):
        load_shard(Comm(), path, n_features=1)
    with pytest.raises(ValueError, match="n_features"):
        load_shard(Comm(), path, n_features=0)


def test_load_shard_errors(tmp_path):
    comm = Comm()
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_shard(comm, tmp_path / "nope.txt")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(LibsvmFormatError, match="empty.txt: no data lines"):
        load_shard(comm, empty)
    one = tmp_path / "one.txt"
    one.write_bytes(b"1 1:1\n1 2:1\n")
    with pytest.raises(LibsvmFormatError, match=r"only one class \(label 1\)"):
        load_shard(comm, one)
    assert load_shard(comm, one, min_classes=1).n_samples == 2
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"1 1:1\n\n-1 2:1 1:1\n")
    with pytest.raises(LibsvmFormatError, match=r"bad.txt:3: feature index 1 follows 2"):
        load_shard(comm, bad)


def test_load_shard_names_the_line_of_a_row_too_large(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"1 1:1\n# c\n\n-1 2:1\n1 1:1e154 2:1e154\n-1 1:1e200\n")
    with pytest.raises(LibsvmFormatError, match=r"big.txt:5: values too large"):
        load_shard(Comm(), path)


@pytest.mark.parametrize(
    "bad, words",
    [
        ("2147483648", "2147483648 is not a 32-bit integer"),
        ("-2147483649", "-2147483649 is not a 32-bit integer"),
        ("1e10", "10000000000 is not a 32-bit integer"),
        ("-1.5", "-1.5 is not an integer"),
    ],
)
def test_load_shard_names_the_line_of_a_label_no_model_file_holds(tmp_path, bad, words):
    """A classifier's labels: 32-bit integers, the C ints LIBSVM reads (the bounds pass)."""
    path = tmp_path / "labels.txt"
    path.write_text(f"2147483647 1:1\n# c\n-2147483648 2:1\n{bad} 1:2\n")
    with pytest.raises(LibsvmFormatError, match=rf"labels.txt:4: label {words} \("):
        load_shard(Comm(), path, model_labels=True)
    assert load_shard(Comm(), path).n_samples == 3  # (regression targets: any number)
    path.write_text("2147483647 1:1\n-2147483648 2:1\n")
    assert load_shard(Comm(), path, model_labels=True).classes.tolist() == [2**31 - 1, -(2**31)]


def test_first_overflowing_row():
    from psvm.io.shard import MAX_SQUARED_NORM, first_overflowing_row

    big = np.sqrt(MAX_SQUARED_NORM)
    indptr = np.array([0, 0, 2, 3, 5])
    assert first_overflowing_row(indptr, np.array([1.0, 2.0, 3.0, 4.0, 5.0])) is None
    assert first_overflowing_row(indptr, np.array([1, 2, 0.99 * big, 0.7 * big, 0.7 * big])) is None
    assert first_overflowing_row(indptr, np.array([1, 2, 0.5 * big, 0.75 * big, 0.75 * big])) == 3
    assert first_overflowing_row(indptr, np.array([1e300, 1.0, 1.0, 1.0, 1.0])) == 1
    assert first_overflowing_row(np.array([0]), np.empty(0)) is None


def test_missing_file_error_pickles():
    # Comm.agree sends the error between ranks.
    from psvm.io.sources import check_readable

    e = check_readable("/no/such/file")
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is FileNotFoundError and str(e2) == str(e) and e2.filename == "/no/such/file"
