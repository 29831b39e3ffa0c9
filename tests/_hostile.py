"""Hostile LIBSVM input: an independent reference of psvm's grammar, and a file mutator.

``line_is_bad`` restates psvm's (deliberately strict) line grammar with regular
expressions and Python's ``float``/``int``, independently of the numba parser:
``label idx:val ...``, ``#`` starts a comment, ASCII whitespace separates tokens,
decimal numbers only (no NaN/inf, hex or ``_``), indices 1-based, strictly
ascending and at most 2**31 - 1, no ``qid:``. A file is valid iff every line is.
"""

from __future__ import annotations

import math
import random
import re

DECIMAL = re.compile(rb"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")
INDEX = re.compile(rb"[+-]?\d+\Z")
MAX_INDEX = 2**31 - 1  # svm-train's int; a model file holds the same indices


def _finite_decimal(tok: bytes) -> bool:
    return DECIMAL.match(tok) is not None and math.isfinite(float(tok))


def line_is_bad(line: bytes) -> bool:
    """True if one physical line (without its ``\\n``) is invalid LIBSVM for psvm."""
    tokens = line.split(b"#", 1)[0].split()  # bytes.split(): ASCII whitespace only
    if not tokens:
        return False
    label, *features = tokens
    if not _finite_decimal(label):
        return True
    prev = 0
    for tok in features:
        idx, colon, val = tok.partition(b":")
        if not colon or INDEX.match(idx) is None:
            return True
        i = int(idx)
        if i < 1 or i > MAX_INDEX or i <= prev or not _finite_decimal(val):
            return True
        prev = i
    return False


def first_bad_line(content: bytes) -> int | None:
    """1-based number of the first invalid line, or None."""
    for k, line in enumerate(content.split(b"\n")):
        if line_is_bad(line):
            return k + 1
    return None


# -- mutations ---------------------------------------------------------------------

JUNK = [
    b"\xff",
    b"\xfe",
    b"\x00",
    b"\xc3",
    b"\xe9",
    b":",
    b"#",
    b" ",
    b"\r",
    b"e",
    b".",
    b"-",
    b"x",
    b"\t",
    b"\n",
    b"+",
]
BAD_VALUES = [
    b"nan",
    b"NaN",
    b"inf",
    b"-inf",
    b"Infinity",
    b"1e999",
    b"0x1p3",
    b"1_0",
    b"",
    b"1e",
    b".",
    b"--1",
    b"1.2.3",
    b"\xff",
]
ODD_LABELS = [
    b"+1",
    b"1.0",
    b"2",
    b"-1",
    b"1e0",
    b"3",
    b"abc",
    b"nan",
    b"inf",
    b"0x1",
    b"+",
    b"\xc3\xa9",
]
BAD_INDICES = [b"0", b"-1", b"qid", b"99999999999", str(MAX_INDEX + 1).encode(), b"a", b"1_0", b""]


def _features(line: bytes) -> tuple[bytes, list[bytes]]:
    tokens = line.split()
    return (tokens[0] if tokens else b"1"), tokens[1:]


def mutate_line(line: bytes, rng: random.Random, *, huge_ok: bool = True) -> bytes:
    """One random corruption of a data line (which may leave it valid)."""
    label, feats = _features(line)
    kind = rng.choice(
        [
            "truncate",
            "junk",
            "swap",
            "dup",
            "value",
            "index",
            "label",
            "crlf",
            "comment",
            "qid",
            "huge",
        ]
    )
    if kind == "truncate":
        return line[: rng.randrange(len(line) + 1)]
    if kind == "junk":
        k = rng.randrange(len(line) + 1)
        return line[:k] + rng.choice(JUNK) + line[k:]
    if kind == "swap" and len(feats) >= 2:
        a = rng.randrange(len(feats) - 1)
        feats[a], feats[a + 1] = feats[a + 1], feats[a]
    elif kind == "dup" and feats:
        a = rng.randrange(len(feats))
        feats.insert(a, feats[a])
    elif kind == "value" and feats:
        a = rng.randrange(len(feats))
        feats[a] = feats[a].split(b":")[0] + b":" + rng.choice(BAD_VALUES)
    elif kind == "index" and feats:
        a = rng.randrange(len(feats))
        feats[a] = rng.choice(BAD_INDICES) + b":" + feats[a].partition(b":")[2]
    elif kind == "label":
        label = rng.choice(ODD_LABELS)
    elif kind == "crlf":
        return line + b"\r"
    elif kind == "comment":
        return line + b" # " + rng.choice(JUNK) + b" 7:x"
    elif kind == "qid":
        feats.insert(0, b"qid:3")
    elif kind == "huge" and huge_ok:
        feats.append(str(rng.choice([10**9, MAX_INDEX, MAX_INDEX + 1])).encode() + b":1")
    return b" ".join([label, *feats])


def mutated_file(base: bytes, rng: random.Random, n_mutations: int, **kw) -> bytes:
    """``base`` with ``n_mutations`` lines corrupted and perhaps blank/comment lines added."""
    lines = base.split(b"\n")
    for _ in range(n_mutations):
        k = rng.randrange(len(lines))
        lines[k] = mutate_line(lines[k], rng, **kw)
    if rng.random() < 0.5:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice([b"", b"   ", b"# note", b"\r"]))
    return b"\n".join(lines)
