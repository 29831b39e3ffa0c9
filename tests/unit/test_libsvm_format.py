"""LIBSVM parsing: exact agreement with scikit-learn, line-numbered errors, byte ranges."""

import io
import lzma
import math
import os
import pickle
import struct
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_svmlight_file

from psvm.io import _libsvm_kernel, libsvm_format
from psvm.io._libsvm_plain import parse_plain
from psvm.io.libsvm_format import (
    LibsvmFormatError,
    cached_path,
    parse_block,
    read_byte_range,
    read_libsvm,
    split_byte_ranges,
    uncompressed_path,
)


@pytest.fixture(scope="module", autouse=True)
def cache_env(tmp_path_factory):
    """One decompression cache for the module, outside the user's home."""
    with pytest.MonkeyPatch.context() as mp:
        d = tmp_path_factory.mktemp("psvm_cache")
        mp.setenv("PSVM_CACHE_DIR", str(d))
        yield d


@pytest.fixture(scope="module", autouse=True, params=["python", "compiled"])
def parser(request):
    """Every test runs on both parsers: Python's for small plain blocks, and the compiled one."""
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "compiled":
            mp.setattr(libsvm_format, "PYTHON_PARSE_BYTES", -1)
        yield request.param


@pytest.fixture
def need(shared_data):
    """name -> path of a real data file (conftest fails the run if the data is missing)."""
    return lambda name: str(shared_data / name)


def assert_same(X, y, X_ref, y_ref):
    """Exact equality of CSR arrays and labels (no tolerance)."""
    assert X.shape == X_ref.shape
    np.testing.assert_array_equal(X.indptr, X_ref.indptr)
    np.testing.assert_array_equal(X.indices, X_ref.indices)
    np.testing.assert_array_equal(X.data, X_ref.data)
    np.testing.assert_array_equal(y, y_ref)
    assert X.data.dtype == np.float64 and X.indices.dtype == np.int32


def sk_load(content: bytes, n_features=None):
    return load_svmlight_file(io.BytesIO(content), zero_based=False, n_features=n_features)


def parse(content: bytes, n_features=None):
    p = parse_block(content, n_features_limit=n_features)
    assert p.error_reason is None, p.error_reason
    return p


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


# -- real files -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["heart_scale.xz", "phishing.xz", "mushrooms.xz", "usps.t.xz", "a9a.xz"]
)
def test_real_files_match_sklearn(name, tmp_path, need):
    path = need(name)
    raw = uncompressed_path(path)
    if name == "a9a.xz":  # the first rows are enough
        with open(raw, "rb") as f:
            head = b"".join(f.readline() for _ in range(3000))
        raw = str(tmp_path / "a9a_head")
        with open(raw, "wb") as f:
            f.write(head)
        path = raw
    X, y = read_libsvm(path)
    X_ref, y_ref = load_svmlight_file(raw, zero_based=False)
    assert_same(X, y, X_ref, y_ref)


def test_phishing_has_no_final_newline(need):
    # The case the last rank meets: a last line without "\n" is still a row.
    raw = uncompressed_path(need("phishing.xz"))
    with open(raw, "rb") as f:
        content = f.read()
    assert not content.endswith(b"\n")
    p = parse(content)
    assert p.y.size == 11055 and p.n_lines == 11055
    assert set(np.unique(p.y)) == {0.0, 1.0}


# -- syntax accepted --------------------------------------------------------------

TRICKY = [
    b"1 1:1 2:2\n-1 3:0.5\n",
    b"+1 1:1\r\n-1 2:2\r\n",  # CRLF
    b"# header\n\n   \n1 1:1 # trailing comment\n\t-1\t2:3\t\n",
    b"1 1:1#glued comment\n2 2:2\n",
    b"1\n2 5:1\n",  # an empty row
    b"1.0 1:0 2:-0 3:-0.0\n1e0 4:1E+2 5:.5 6:5. 7:-1e-3\n",
    b"2 1:1\n1 2:1",  # no final newline
    b"1 1:1\n  \n",  # trailing whitespace-only line
    b"1 01:1 0010:2\n2 +3:1\n",  # leading zeros and sign in indices, as int() accepts
    b"3 1:0.1 2:0.3 3:1.7976931348623157e308 4:5e-324 5:2.2250738585072014e-308\n-3 1:1\n",
    b"1 1:12345678901234567890 2:0.000000000000000000000000001 3:9007199254740993\n2 1:1\n",
    b"1 1:1\x0b2:2\x0c3:3\n",  # vertical tab and form feed are whitespace
]


@pytest.mark.parametrize("content", TRICKY)
def test_tricky_content_matches_sklearn(content):
    X_ref, y_ref = sk_load(content)
    X, y = read_libsvm_bytes(content)
    assert_same(X, y, X_ref, y_ref)


def read_libsvm_bytes(content):
    p = parse(content)
    n_features = int(p.indices.max()) + 1 if p.indices.size else 0
    from psvm.io.libsvm_format import to_csr

    return to_csr(p, n_features), p.y


def test_labels_and_comments():
    p = parse(b"+1 1:1\n#c\n1.0 1:1\n\n2 1:1\n-1 1:1\n1e0 1:1\n")
    np.testing.assert_array_equal(p.y, [1, 1, 2, -1, 1])
    assert p.n_lines == 7
    np.testing.assert_array_equal(p.indptr, [0, 1, 2, 3, 4, 5])


def test_explicit_zeros_are_kept():
    p = parse(b"1 1:0 3:0.0\n")
    np.testing.assert_array_equal(p.indices, [0, 2])
    np.testing.assert_array_equal(p.data, [0.0, 0.0])


# -- exact float conversion ---------------------------------------------------------

EDGE_FLOATS = [
    "0",
    "-0",
    "0.1",
    "0.2",
    "0.3",
    "1.7976931348623157e308",
    "2.2250738585072014e-308",
    "4.9e-324",
    "1e-400",
    "9007199254740993",
    "9007199254740992",
    "9007199254740991",
    "123456789012345678901234567890",
    "0.1e23",
    "1e22",
    "1e23",
    "1e-22",
    "1e-23",
    "8.98846567431158e307",
    "0.000001",
    "-0.999999",
    "2.5e-3",
    "1.",
    ".5",
    "+.5e+2",
    "00000000000000000000000000000.1",
    "0." + "0" * 30 + "1",
    "1" + "0" * 40 + "e-40",
    "3.141592653589793238462643383279",
    "0e999",
    "1E5",
    "1e0000000000000000000000001",
]


@pytest.mark.parametrize("tok", EDGE_FLOATS)
def test_edge_floats_equal_python_float(tok):
    p = parse(f"{tok} 1:{tok}\n".encode())
    assert bits(p.data[0]) == bits(float(tok))
    assert bits(p.y[0]) == bits(float(tok))


def test_slow_tokens_past_the_first_table(monkeypatch):
    """Labels and values off the fast path fill the first table of slow tokens: the reader
    parses again with room for all of them, and an error still names its line."""
    import psvm.io._libsvm_kernel as kernel

    monkeypatch.setattr(kernel, "SLOW_ROOM", 2)
    tokens = [t for t in EDGE_FLOATS if t != "0e999"]
    content = "".join(f"{t} 1:{t} 2:{t}\n" for t in tokens).encode()
    p = parse(content)
    assert [bits(v) for v in p.y] == [bits(float(t)) for t in tokens]
    assert [bits(v) for v in p.data] == [bits(float(t)) for t in tokens for _ in "12"]
    bad = parse_block(content + b"1 1:x\n")
    assert bad.error_line == len(tokens) + 1 and "invalid feature value" in bad.error_reason


decimal_tokens = st.builds(
    lambda sign, ip, dot, fp, ex: sign + ip + dot + fp + ex,
    st.sampled_from(["", "+", "-"]),
    st.text("0123456789", max_size=20),
    st.sampled_from(["", "."]),
    st.text("0123456789", max_size=20),
    st.one_of(st.just(""), st.integers(-340, 330).map(lambda e: f"e{e:+d}")),
).filter(lambda t: any(c.isdigit() for c in t.split("e")[0]))


@settings(max_examples=200, deadline=None, database=None)
@given(decimal_tokens)
def test_random_decimals_equal_python_float(tok):
    expected = float(tok)
    p = parse_block(f"1 1:{tok}\n".encode())
    if math.isinf(expected):
        assert "non-finite" in p.error_reason
    else:
        assert p.error_reason is None
        assert bits(p.data[0]) == bits(expected)


# -- errors -----------------------------------------------------------------------

ERRORS = [
    # (content, line, words in the reason)
    (b"1 1:1\n1 1:1 2\n", 2, ["'2'", "missing ':'"]),
    (b"1 1:1\n\n# c\n1 a:1\n", 4, ["index", "'a:1'"]),
    (b"1 1:1\n1 1:x\n", 2, ["value", "'1:x'"]),
    (b"1 1:1\n1 2:1.2.3\n", 2, ["value"]),
    (b"1 0:1\n", 1, ["index 0", ">= 1", "zero_based=False"]),
    (b"1 1:1\n1 -3:1\n", 2, ["index -3", "is negative"]),
    (b"1 1:1\n1 1:1 5:1 3:1\n", 2, ["index 3 follows 5", "ascending"]),
    (b"1 1:1\n1 2:1 2:1\n", 2, ["index 2 follows 2", "ascending"]),
    (b"1 1:1\n1 2:nan\n", 2, ["non-finite", "'2:nan'"]),
    (b"1 1:1\n1 2:-Infinity\n", 2, ["non-finite"]),
    (b"1 1:1\n1 2:1e999\n", 2, ["non-finite", "'2:1e999'"]),
    (b"1 1:1\nnan 2:1\n", 2, ["non-finite label"]),
    (b"1 1:1\n1e400 2:1\n", 2, ["non-finite label"]),
    (b"1 1:1\n1 qid:3 2:1\n", 2, ["qid", "not supported"]),
    (b"1 1:1\nabc 1:1\n", 2, ["invalid label 'abc'"]),
    (b"1 1:1\n1:1 2:1\n", 2, ["invalid label '1:1'"]),
    (b"1 1:1\n1 1:0x1p3\n", 2, ["value"]),
    (b"1 1:1\n1 1:1_000\n", 2, ["value"]),
    (b"1 1:1\n1 1_0:1\n", 2, ["index"]),
    (b"1 1:1\n1 1:\n", 2, ["value"]),
    (b"1 1:1\n1 :1\n", 2, ["index"]),
    (b"1 1:1\n1 1:1e\n", 2, ["value"]),
    (b"1 1:1\n1 1:.\n", 2, ["value"]),
    (b"1 1:1\n1 1:--1\n", 2, ["value"]),
    (b"1 1:1\n1 99999999999:1\n", 2, ["too large"]),
    (b"1 1:1\r\n1 1:1\r\n1 1:x\r\n", 3, ["value"]),
    (b"1 1:1\n1 2:1\n1 3:1", 3, []),  # no error: checked below with n_features
]


@pytest.mark.parametrize("content,line,words", ERRORS[:-1])
def test_error_line_and_reason(content, line, words, tmp_path):
    p = parse_block(content)
    assert p.error_line == line
    for w in words:
        assert w in p.error_reason
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(LibsvmFormatError) as info:
        read_libsvm(path)
    e = info.value
    assert (e.path, e.line, e.reason) == (str(path), line, p.error_reason)
    assert str(e) == f"{path}:{line}: {p.error_reason}"


def test_sklearn_also_rejects_our_index_errors():
    # Our strictness is a superset of scikit-learn's on indices.
    for content in (b"1 0:1\n", b"1 2:1 1:1\n", b"1 2:1 2:1\n"):
        with pytest.raises(ValueError):
            sk_load(content)


def test_n_features_limit(tmp_path):
    content = b"1 1:1\n2 2:1\n1 3:1\n"
    path = tmp_path / "f.txt"
    path.write_bytes(content)
    with pytest.raises(LibsvmFormatError, match=r":3: feature index 3 exceeds n_features=2"):
        read_libsvm(path, n_features=2)
    X, _ = read_libsvm(path, n_features=5)
    assert_same(X, _, *sk_load(content, n_features=5))


@pytest.mark.parametrize("python_path", [True, False])
def test_allow_zero_reads_index_0_as_a_feature(monkeypatch, python_path):
    """svm-train's reading: a block with index 0 keeps the file's indices (has_zero), one
    without gives file index - 1 as by default; the limit is the largest index either way.
    Both parsers (the Python one declines index 0) give the same arrays."""
    if not python_path:
        monkeypatch.setattr(libsvm_format, "PYTHON_PARSE_BYTES", -1)
    zero = parse_block(b"1 0:1 2:3\n-1 1:2\n", allow_zero=True)
    assert zero.has_zero and zero.indices.tolist() == [0, 2, 1]
    plain = parse_block(b"1 1:1 2:3\n-1 1:2\n", allow_zero=True)
    default = parse_block(b"1 1:1 2:3\n-1 1:2\n")
    assert not plain.has_zero and plain.indices.tolist() == default.indices.tolist() == [0, 1, 0]
    assert parse_block(b"1 0:1 2:3\n", allow_zero=True, n_features_limit=2).error_line is None
    for content, reason in [
        (b"1 0:1 3:3\n", "feature index 3 exceeds the largest index, 2"),
        (b"1 -1:1\n", "feature index -1 is negative"),
        (b"1 x:1\n", "expected a base-10 integer >= 0"),
    ]:
        bad = parse_block(content, allow_zero=True, n_features_limit=2)
        assert bad.error_line == 1 and reason in bad.error_reason, bad.error_reason
    assert "not >= 1" in parse_block(b"1 0:1\n").error_reason  # without it, as LIBLINEAR
    assert "feature index -2 is negative" in parse_block(b"1 1:1 -2:1\n").error_reason
    # negative, not "too large", beyond int too; never wrapped around int64 (-2**63 * 10 read
    # as index 0 once)
    for index in (2**31, 3 * 10**9, 10**19 - 1, 2**63 * 10, 2**63 * 10 + 7):
        for zero in (True, False):
            bad = parse_block(b"1 -%d:1\n" % index, allow_zero=zero)
            assert bad.error_reason == f"feature index in '-{index}:1' is negative", bad
    codes = [v for k, v in vars(_libsvm_kernel).items() if k.startswith("ERR_") or k == "SLOW_FULL"]
    assert len(set(codes)) == len(codes)  # (a code shared with SLOW_FULL parses twice)
    for index in (10**19 - 1, 2**63 * 10):  # and positive ones, whatever their length
        big = parse_block(b"1 %d:1\n" % index)
        assert "too large (max 2147483647)" in big.error_reason, big.error_reason
    # the largest index is svm-train's int, 0-based or not: a model of the data holds it and
    # reads back (2**31 once trained and wrote a model that psvm-predict refused)
    top = parse_block(b"1 0:1 2147483647:1\n", allow_zero=True)
    assert top.error_line is None and top.indices.tolist() == [0, 2**31 - 1]
    top = parse_block(b"1 1:1 2147483647:1\n")
    assert top.error_line is None and top.indices.tolist() == [0, 2**31 - 2]
    for zero in (True, False):
        big = parse_block(b"1 1:1 2147483648:1\n", allow_zero=zero)
        assert "too large (max 2147483647)" in big.error_reason
    named = parse_block(b"1 9:1\n", n_features_limit=5, limit_name="--n-features")
    assert named.error_reason == "feature index 9 exceeds n_features=5 (--n-features)"


def test_empty_file_is_an_error(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"# only a comment\n\n")
    with pytest.raises(LibsvmFormatError, match="no data lines"):
        read_libsvm(path)


def test_error_pickles():
    for e in (LibsvmFormatError("a.txt", 7, "bad"), LibsvmFormatError("a.txt", None, "empty")):
        e2 = pickle.loads(pickle.dumps(e))
        assert type(e2) is LibsvmFormatError and isinstance(e2, ValueError)
        assert (e2.path, e2.line, e2.reason, str(e2)) == (e.path, e.line, e.reason, str(e))
    e.collective = True  # (set by Comm.agree: an error gathered from a rank keeps it)
    assert pickle.loads(pickle.dumps(e)).collective is True
    assert str(LibsvmFormatError("a.txt", None, "empty")) == "a.txt: empty"
    assert str(LibsvmFormatError("a.txt", 7, "bad")) == "a.txt:7: bad"


# -- byte ranges --------------------------------------------------------------------


def test_split_byte_ranges():
    for size in (0, 1, 7, 1000):
        for n in range(1, 7):
            r = split_byte_ranges(size, n)
            assert len(r) == n and r[0][0] == 0 and r[-1][1] == size
            assert all(a[1] == b[0] for a, b in zip(r[:-1], r[1:], strict=True))
            assert max(e - s for s, e in r) - min(e - s for s, e in r) <= 1
    with pytest.raises(ValueError):
        split_byte_ranges(10, 0)


SMALL = [b"", b"1 1:1", b"1 1:1\n", b"\n\n1 1:1\n\n2 2:2", b"1 1:1\r\n# c\n2 2:2\n3 3:3\n"]


@pytest.mark.parametrize("content", SMALL)
def test_every_split_tiles_the_file(content, tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(content)
    size = len(content)
    for n in range(1, size + 3):
        blocks = [read_byte_range(path, s, e) for s, e in split_byte_ranges(size, n)]
        assert b"".join(blocks) == content
        starts = {0} | {i + 1 for i, c in enumerate(content) if c == 10}
        pos = 0
        for b in blocks:  # every non-empty block starts at a line start
            assert not b or pos in starts
            pos += len(b)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_blocks_concatenate_to_whole_file(n, need):
    path = uncompressed_path(need("heart_scale.xz"))
    with open(path, "rb") as f:
        content = f.read()
    whole = parse(content)
    blocks = [read_byte_range(path, s, e) for s, e in split_byte_ranges(len(content), n)]
    assert b"".join(blocks) == content
    parts = [parse(b) for b in blocks]
    assert sum(p.n_lines for p in parts) == whole.n_lines == 270
    np.testing.assert_array_equal(np.concatenate([p.y for p in parts]), whole.y)
    np.testing.assert_array_equal(np.concatenate([p.data for p in parts]), whole.data)
    np.testing.assert_array_equal(np.concatenate([p.indices for p in parts]), whole.indices)
    row_nnz = np.concatenate([np.diff(p.indptr) for p in parts])
    np.testing.assert_array_equal(row_nnz, np.diff(whole.indptr))


def test_block_error_line_becomes_global():
    content = b"1 1:1\n\n2 2:1\n# c\n1 3:1\n2 4:x\n"
    blocks = [read_byte_range_bytes(content, s, e) for s, e in split_byte_ranges(len(content), 3)]
    lines_before, found = 0, None
    for b in blocks:
        p = parse_block(b)
        if found is None and p.error_reason:
            found = p.error("f.txt", lines_before)
        lines_before += p.n_lines
    assert found.line == 6 and str(found).startswith("f.txt:6: invalid feature value")


def read_byte_range_bytes(content, s, e):
    import tempfile

    with tempfile.NamedTemporaryFile() as f:
        f.write(content)
        f.flush()
        return read_byte_range(f.name, s, e)


# -- compressed input ---------------------------------------------------------------


@pytest.mark.parametrize("ext", [".xz", ".bz2", ".gz"])
def test_compressed_round_trip(ext, tmp_path, cache_env):
    import bz2
    import gzip

    content = b"1 1:0.5 3:1\n-1 2:2\n"
    comp = {".xz": lzma.compress, ".bz2": bz2.compress, ".gz": gzip.compress}[ext]
    path = tmp_path / f"data.txt{ext}"
    path.write_bytes(comp(content))
    target = cached_path(path)
    assert target.startswith(str(cache_env)) and not os.path.exists(target)
    X, y = read_libsvm(path)
    assert_same(X, y, *sk_load(content))
    with open(target, "rb") as f:
        assert f.read() == content
    mtime = os.stat(target).st_mtime_ns
    assert uncompressed_path(path) == target and os.stat(target).st_mtime_ns == mtime
    assert not [f for f in os.listdir(cache_env) if f.startswith(".tmp-")]
    # A changed file gets a new cache entry; it removes the old one if that is an hour old
    # (no run loading it any more), not a recent one nor other files' copies.
    other = tmp_path / f"other.txt{ext}"
    other.write_bytes(comp(content))
    kept = uncompressed_path(other)
    hours_ago = time.time() - 2 * 3600
    legacy = [os.path.join(cache_env, f"data.txt.{c * 20}") for c in "0a"]  # older psvm's names
    for copy in (target, kept, *legacy):
        open(copy, "ab").close()
        os.utime(copy, (hours_ago, hours_ago))
    os.utime(legacy[1])  # (now: an older psvm may be reading it)
    for k, extra in enumerate([b"1 4:4\n", b"1 5:5\n"]):
        path.write_bytes(comp(content + extra))
        os.utime(path, ns=(mtime + (k + 1) * 10**9,) * 2)
        assert cached_path(path) != target
        assert read_libsvm(path)[0].shape == (3, 4 + k)
        new = cached_path(path)
        assert os.path.exists(target) == (k == 1) and os.path.exists(new)  # (k 1: recent)
        target = new
    assert os.path.exists(kept) and [os.path.exists(f) for f in legacy] == [False, True]
    versions = [f for f in os.listdir(cache_env) if f.startswith(os.path.basename(new)[:-20])]
    assert len(versions) == 2


def test_plain_file_is_not_copied(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_bytes(b"1 1:1\n")
    assert uncompressed_path(path) == str(path) and cached_path(path) is None


def test_corrupt_compressed_file(tmp_path, cache_env):
    path = tmp_path / "broken.xz"
    path.write_bytes(lzma.compress(b"1 1:1\n" * 1000)[:-20])
    with pytest.raises(LibsvmFormatError, match="cannot decompress"):
        uncompressed_path(path)
    assert not os.path.exists(cached_path(path))
    assert not [f for f in os.listdir(cache_env) if f.startswith(".tmp-")]


def test_kernel_compiles_once(parser):
    from psvm.io._libsvm_kernel import parse_kernel

    parse_block(b"1 1:1\n", n_features_limit=3)
    parse_block(bytearray(b"1 1:1 2:x\n"))
    assert len(parse_kernel.signatures) == 1


plain_lines = st.lists(
    st.lists(
        st.sampled_from(
            [
                "1",
                "-1",
                "+2",
                "0",
                "01",
                ":",
                "1:",
                ":2",
                "1e",
                "e",
                ".",
                "3:1e3",
                "2:-0.5",
                "9:.5",
                "4:1e999",
                "2147483648:1",
                "2147483649:1",
            ]
        ),
        max_size=6,
    ).map(" ".join),
    max_size=5,
).map(lambda lines: "\n".join(lines).encode())


@settings(max_examples=300, deadline=None, database=None)
@given(plain_lines, st.sampled_from([None, 3]))
def test_python_and_compiled_parsers_agree(content, limit):
    python = parse_block(content, n_features_limit=limit)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(libsvm_format, "PYTHON_PARSE_BYTES", -1)
        compiled = parse_block(content, n_features_limit=limit)
    for a, b in zip(python[:4], compiled[:4], strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    assert python[4:] == compiled[4:]


def test_small_plain_blocks_do_not_compile_the_parser():
    y, indptr, _, _ = parse_plain(b"1 1:0.5 3:2\n\n-1 2:1e-3\n", 2**31 - 1)
    assert y.tolist() == [1.0, -1.0] and indptr.tolist() == [0, 2, 3]
    for declined in (b"1 1:1 # c\n", b"1 1:nan\n", b"1 2:1 1:1\n", b"1 qid:1\n", b"1 1:1\x0b2:1\n"):
        assert parse_plain(declined, 2**31 - 1) is None


def test_data_line_number_skips_blank_and_comment_lines():
    from psvm.io.libsvm_format import data_line_number

    buf = b"# head\n1 1:1\n\n  \t\r\n-1 2:1 # c\n#\n1 3:1"
    assert [data_line_number(buf, r) for r in range(3)] == [2, 5, 7]
    p = parse_block(buf)
    assert p.y.size == 3
