"""load_shard under mpiexec: shards tile the file, errors stop every rank alike.

Each test launches tests/mpi/run_load.py once and checks several files in it,
because a launch costs more than a load.
"""

import json
import lzma
import os
import re

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from psvm.io.libsvm_format import (
    parse_block,
    read_byte_range,
    split_byte_ranges,
    uncompressed_path,
)
from psvm.io.shard import nnz_balanced_offsets
from tests._helpers import run_mpi

TIMEOUT = 90


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A private decompression cache, and a warm numba cache for the ranks."""
    cache = str(tmp_path_factory.mktemp("psvm_cache"))
    parse_block(b"1 1:1\n")
    return {"PSVM_CACHE_DIR": cache}


@pytest.fixture(scope="module")
def files(tmp_path_factory, shared_data):
    """name -> (path, message every rank must raise, or None for good files)."""
    d = tmp_path_factory.mktemp("data")
    with lzma.open(shared_data / "heart_scale.xz") as f:
        heart = f.read()

    def line_at(frac):
        """1-based number and offset of the first line starting after frac * size."""
        start = heart.index(b"\n", int(frac * len(heart))) + 1
        return heart[:start].count(b"\n") + 1, start

    def corrupt(content, start, new):
        return content[:start] + new + content[content.index(b"\n", start) :]

    la, sa = line_at(0.52)  # in rank 1's byte range for P = 2 and P = 3
    lb, sb = line_at(0.90)  # in rank 2's byte range for P = 3
    late = corrupt(heart, sb, b"-1 1:0.5 2:oops")
    two = corrupt(late, sa, b"+1 1:0.5 3:0.2 2:0.1")
    specs = {
        # the first of two bad lines wins
        "bad_two": (
            two,
            f"{{}}:{la}: feature index 2 follows 3: indices must be strictly ascending",
        ),
        "bad_late": (
            late,
            f"{{}}:{lb}: invalid feature value in '2:oops': expected a decimal number",
        ),
        "empty": (b"# nothing here\n\n", "{}: no data lines (empty file)"),
        "one_class": (
            b"2 1:1\n2 2:1\n2 1:3\n",
            "{}: only one class (label 2); at least 2 are needed",
        ),
        "tiny": (b"1 1:1\n-1\n1 2:1 3:2", None),  # an empty row, no final newline
        "tiny_bad": (
            b"1 1:1\n-1\n1 2:1 3:x\n",
            "{}:3: invalid feature value in '3:x': expected a decimal number",
        ),
    }
    out = {}
    for name, (content, message) in specs.items():
        path = d / f"{name}.txt"
        path.write_bytes(content)
        out[name] = (str(path), message and "LibsvmFormatError: " + message.format(path))
    missing = str(d / "missing.txt")
    out["missing"] = (
        missing,
        f"FileNotFoundError: [Errno 2] No such file or directory: '{missing}'",
    )
    return out


def check_shards(case, arrays, path, P, balance):
    """The gathered shards equal scikit-learn's read, with consistent metadata."""
    assert case["ok"], case
    X_ref, y_ref = load_svmlight_file(uncompressed_path(path), zero_based=False)
    np.testing.assert_array_equal(arrays["y"], y_ref)
    np.testing.assert_array_equal(arrays["row_nnz"], np.diff(X_ref.indptr))
    np.testing.assert_array_equal(arrays["indices"], X_ref.indices)
    np.testing.assert_array_equal(arrays["data"], X_ref.data)
    shards = case["shards"]
    assert len(shards) == P
    first = shards[0]
    for key in ("n_samples", "n_features", "max_row_nnz", "classes"):
        assert all(s[key] == first[key] for s in shards), key
    assert first["n_samples"] == X_ref.shape[0] and first["n_features"] == X_ref.shape[1]
    assert first["max_row_nnz"] == int(np.diff(X_ref.indptr).max())
    _, idx = np.unique(y_ref, return_index=True)
    assert first["classes"] == y_ref[np.sort(idx)].tolist()
    # rank r holds rows offset_r .. offset_{r+1} - 1: the ranks' blocks tile the file in order
    offsets = [s["offset"] for s in shards] + [first["n_samples"]]
    if balance:
        expected = nnz_balanced_offsets(np.diff(X_ref.indptr), P)
    else:
        raw = uncompressed_path(path)
        counts = [
            parse_block(read_byte_range(raw, s, e)).y.size
            for s, e in split_byte_ranges(os.path.getsize(raw), P)
        ]
        expected = np.concatenate(([0], np.cumsum(counts)))
    np.testing.assert_array_equal(offsets, expected)
    for r, s in enumerate(shards):
        n_local = offsets[r + 1] - offsets[r]
        assert s["offset"] == offsets[r] and s["n_local"] == n_local == s["y_size"]
        assert s["shape"] == [n_local, first["n_features"]]
        assert (s["indices_dtype"], s["data_dtype"]) == ("int32", "float64")


def check_error(case, expected, P):
    """Every rank raised the same message."""
    assert not case["ok"]
    assert len(case["errors"]) == P and len(set(case["errors"])) == 1, case["errors"]
    assert case["errors"][0] == expected


def run_catch(paths, P, env, tmp_path):
    proc = run_mpi(
        "run_load.py", ["--catch", "--out", str(tmp_path), *paths], P, timeout=TIMEOUT, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("P", [1, 2, 3])
def test_shards_tile_the_file(P, env, files, tmp_path, shared_data):
    good = [
        str(shared_data / "heart_scale.xz"),
        str(shared_data / "mushrooms.xz"),
        files["tiny"][0],
    ]
    bad = ["bad_two", "bad_late", "empty", "one_class", "missing"]
    cases = run_catch(good + [files[k][0] for k in bad], P, env, tmp_path)
    assert len(cases) == 2 * len(good + bad)
    for i, path in enumerate(good):
        for j, balance in enumerate((True, False)):
            arrays = np.load(tmp_path / f"case{2 * i + j}.npz")
            check_shards(cases[2 * i + j], arrays, path, P, balance)
    for i, key in enumerate(bad, start=len(good)):
        check_error(cases[2 * i], files[key][1], P)
        check_error(cases[2 * i + 1], files[key][1], P)


def test_more_ranks_than_rows(env, files, tmp_path):
    P = 4  # tiny has 3 rows
    path, _ = files["tiny"]
    bad_path, message = files["tiny_bad"]
    cases = run_catch([path, bad_path], P, env, tmp_path)
    for j, balance in enumerate((True, False)):
        check_shards(cases[j], np.load(tmp_path / f"case{j}.npz"), path, P, balance)
        assert any(s["n_local"] == 0 and s["shape"] == [0, 3] for s in cases[j]["shards"])
        check_error(cases[2 + j], message, P)


@pytest.mark.parametrize("P", [2, 3])
def test_corrupt_line_stops_every_rank(P, env, files):
    path, expected = files["bad_two"]
    proc = run_mpi("run_load.py", [path], P, timeout=TIMEOUT, env=env)
    assert proc.returncode != 0
    found = re.findall(r"rank (\d+): (.*?)(?=rank \d+: |\n|$)", proc.stderr)
    assert sorted(int(r) for r, _ in found) == list(range(P)), proc.stderr
    assert all(msg == expected for _, msg in found), proc.stderr
    assert proc.stdout == ""
