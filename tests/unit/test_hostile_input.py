"""Hostile input (issue 7): random and mutated LIBSVM files, and bad command-line values.

Property: every file either parses to exactly scikit-learn's
``load_svmlight_file(zero_based=False)`` matrix, or fails with an error naming
its *first* invalid line, as judged by the independent reference grammar in
``tests/_hostile.py`` (psvm is stricter than scikit-learn: NaN/inf, hex floats,
``_`` in numbers, descending or duplicate indices and ``qid:`` are errors).
The same holds when the file is cut into byte ranges as P = 2 or 3 ranks cut
it. Fixed cases live in ``test_libsvm_format.py``; this file only generates.
"""

import io
import os
import random
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_svmlight_file

from psvm.io.libsvm_format import (
    LibsvmFormatError,
    parse_block,
    read_byte_range,
    read_libsvm,
    split_byte_ranges,
    to_csr,
)
from tests._hostile import first_bad_line, mutated_file

FAST = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

# -- strategies ----------------------------------------------------------------------

labels = st.sampled_from(["1", "+1", "-1", "1.0", "2", "0", "3e0", "-2.5", ".5", "1E+0"])
values = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["0", "-0", "1e-3", "1E+2", ".5", "5.", "1e22", "1e23", "007", "+.5e-1"]),
)
indices = st.one_of(st.integers(1, 60), st.sampled_from([10**6, 10**9, 2**31 - 1, 2**31]))


@st.composite
def data_lines(draw):
    idx = sorted(draw(st.sets(indices, max_size=6)))
    sep = draw(st.sampled_from([" ", "\t", "  ", " \x0b"]))
    feats = [f"{i}:{draw(values)}" for i in idx]
    line = sep.join([draw(labels), *feats])
    line += draw(st.sampled_from(["", " ", "\r", " # comment", "#glued", " \r"]))
    return line.encode()


blank_lines = st.sampled_from([b"", b"   ", b"# header", b"\t# c 1:nan", b"\r"])
files = st.lists(st.one_of(data_lines(), data_lines(), blank_lines), max_size=12).map(
    lambda lines: b"\n".join(lines)
) | st.lists(st.one_of(data_lines(), blank_lines), max_size=12).map(
    lambda lines: b"".join(line + b"\n" for line in lines)
)
# Random bytes weighted towards the format's own characters, plus non-UTF-8 bytes.
noise = st.lists(
    st.sampled_from(list(b"0123456789 ::..\n\n\r\t#+-eE") + [0xFF, 0xC3, 0x00, 0x0B, ord("n")]),
    max_size=80,
).map(bytes)


# -- the property ----------------------------------------------------------------------


def sk_matrix(content: bytes):
    return load_svmlight_file(io.BytesIO(content), zero_based=False)


def check(content: bytes) -> None:
    """Same matrix as scikit-learn, or an error on the first bad line; also per block."""
    bad = first_bad_line(content)
    p = parse_block(content)
    if bad is not None:
        assert p.error_line == bad, (content, p.error_line, bad, p.error_reason)
        assert p.error_reason
    else:
        assert p.error_reason is None, (content, p.error_reason)
        assert p.n_lines == content.count(b"\n") + (not content.endswith(b"\n") and bool(content))
        if p.y.size:  # (index 2**31 - 1 too: psvm's largest, as scikit-learn's)
            X_ref, y_ref = sk_matrix(content)  # psvm accepts a subset of what sklearn does
            X = to_csr(p, int(p.indices.max()) + 1 if p.indices.size else 0)
            # Without any feature sklearn reports one column, psvm none.
            assert X.shape == X_ref.shape or (X.nnz == 0 and X.shape[0] == X_ref.shape[0])
            np.testing.assert_array_equal(X.indptr, X_ref.indptr)
            np.testing.assert_array_equal(X.indices, X_ref.indices)
            assert X.data.tobytes() == X_ref.data.tobytes()  # bitwise, -0.0 included
            assert p.y.tobytes() == y_ref.tobytes()
    for n_ranks in (2, 3):
        assert blockwise_error_line(content, n_ranks) == bad


def blockwise_error_line(content: bytes, n_ranks: int) -> int | None:
    """The global error line as load_shard finds it: byte ranges, exscan of line counts."""
    with tempfile.NamedTemporaryFile() as f:
        f.write(content)
        f.flush()
        ranges = split_byte_ranges(len(content), n_ranks)
        blocks = [read_byte_range(f.name, s, e) for s, e in ranges]
    assert b"".join(blocks) == content
    lines_before, found = 0, []
    for b in blocks:
        p = parse_block(b)
        if p.error_reason is not None:
            found.append(lines_before + p.error_line)
        lines_before += p.n_lines
    return found[0] if found else None  # Comm.agree: the lowest failing rank's error


@FAST
@given(files)
def test_generated_files(content):
    check(content)


@FAST
@given(st.integers(0, 2**32), st.integers(1, 3))
def test_mutated_files(seed, n_mutations):
    rng = random.Random(seed)
    lines = [
        b"1 1:0.5 3:1 7:-2\n",
        b"-1 2:1e-3 3:.5\n",
        b"2 1:1\r\n",
        b"# c\n",
        b"\n",
        b"+1 4:4 5:5 60:6\n",
    ]
    base = b"".join(rng.choice(lines) for _ in range(6))
    check(mutated_file(base, rng, n_mutations))


@FAST
@given(noise)
def test_random_bytes(content):
    check(content)


@settings(max_examples=40, deadline=None, database=None)
@given(files, st.integers(0, 2**32))
def test_read_libsvm_error_names_file_and_line(content, seed):
    rng = random.Random(seed)
    content = mutated_file(content, rng, 1) if content else content
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "hostile.txt")
        with open(path, "wb") as f:
            f.write(content)
        bad = first_bad_line(content)
        try:
            X, y = read_libsvm(path)
        except LibsvmFormatError as e:
            assert e.path == path and e.line == bad
            assert str(e).startswith(f"{path}:{bad}: " if bad else f"{path}: no data lines")
        else:
            assert bad is None and X.shape[0] == y.size > 0


# -- bad command-line values not covered by test_cli.py / test_estimator.py -------------


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["-c", "0"], "C must be > 0"),
        (["-c", "nan"], "C must be finite"),
        (["-g", "-1"], "gamma must be >= 0"),
        (["-g", "inf"], "gamma must be finite"),
        (["-e", "-1e-3"], "tol must be > 0"),
        (["-m", "-5"], "cache_size must be > 0"),
        (["-t", "1", "-d", "-1"], "option -d: degree must be >= 0, got -1"),
        (
            ["-t", "1", "-d", "2147483648"],
            "option -d: degree must be <= 2147483647, got 2147483648",
        ),
        (["--solver", "sgd", "--epochs", "0"], "option --epochs: max_iter must be >= 1"),
        (["-d", "2.5"], "-d expects an integer"),
        (["--max-iter", "-2"], "max_iter"),
        (["--reconstruction", "often"], "reconstruction must be one of"),
        (["--selection", "third"], "selection must be one of"),
        (["-w1", "-2"], "option -w1: class_weight[1.0] must be > 0"),
        (["-h", "2"], "shrinking must be 0 or 1"),
        (["-h", "0", "--heuristic", "lazy"], "contradicts"),
        (["-h", "1", "--heuristic", "none"], "-h 1 contradicts --heuristic none"),
        (["-b", "2"], "probability_estimates must be 0 or 1"),
        (["--solver", "qp"], "--solver qp"),
        (["--epochs", "3"], "unknown option --epochs: it is an option of --solver sgd"),
        (["--solver", "sgd", "--solver", "smo"], "--solver sgd, then --solver smo: give it once"),
        (["--solver", "smo", "--solver", "sgd"], "--solver smo, then --solver sgd: give it once"),
        (["-v", "5", "--seed", "-1"], "--seed -1: must be >= 0"),
        (["--solver", "sgd", "--seed", "-1"], "--seed -1: must be >= 0"),
        (["--solver", "sgd", "-w1", "nan"], "option -w1: class_weight[1.0] must be finite"),
        (["--solver", "sgd", "-w1", "-2"], "option -w1: class_weight[1.0] must be >= 0"),
        (["--solver", "sgd", "--tol", "-1"], "option --tol: tol must be >= 0"),
    ],
)
def test_bad_parameters_are_rejected_before_reading_the_data(argv, fragment, capsys, tmp_path):
    from psvm.cli.train import main

    missing = tmp_path / "never_read.txt"  # the parameter error must come first
    model = tmp_path / "m.model"
    assert main([*argv, str(missing), str(model)]) == 1
    err = capsys.readouterr().err
    assert fragment in err, err
    assert "never_read" not in err.split("\n\n")[0] and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=30, deadline=None, database=None)
@given(
    files,
    st.sampled_from([b"1 1:1e999", b"1e999 1:1", b"2 3:-1e400"]),
    st.sampled_from([b"1 1:x", b"1 2:1 1:1", b"abc", b"1 0:1"]),
)
def test_overflow_is_reported_before_a_later_syntax_error(content, overflow, syntax):
    # Regression: overflowing tokens (valid syntax, checked after the numba pass)
    # used to lose to a syntax error on a later line.
    check(b"\n".join([content, overflow, b"1 1:1", syntax]))
