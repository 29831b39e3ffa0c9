"""What one rank trains on and from: its rows wired for one-vs-rest, and its model state.

A :class:`LocalProblem` holds the rank's rows in the kernels' dtypes with the
class wiring of each model; an :class:`SGDState` is everything a rank needs
to continue training (``partial_fit``, more epochs). :mod:`psvm.sgd.trainer`
runs the epochs over both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from psvm.kernels import canonical_csr, csr_arrays
from psvm.sgd import steps

# scikit-learn's rule: the bias learns 100x slower on sparse input (fewer, larger updates).
# LIBSVM files are sparse, so psvm-train --solver sgd always uses it.
SPARSE_INTERCEPT_DECAY = 0.01


def row_hash(seed: int, offset: int, n: int) -> np.ndarray:
    """A uint64 for each of the global rows offset..offset+n-1 from (seed, row): splitmix64's
    finaliser, a bijection, so the rows' values are distinct and do not depend on P."""
    z = (np.uint64(seed) << np.uint64(32)) ^ np.arange(offset, offset + n, dtype=np.uint64)
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def class_shares(counts: np.ndarray, n_test: int) -> np.ndarray:
    """How many of ``n_test`` rows each class gives, in proportion to its ``counts``: the
    floors, then one more to the largest remainders (ties: the lower class), as scikit-learn's
    StratifiedShuffleSplit allots them (which breaks its ties at random)."""
    exact = n_test * counts / max(int(counts.sum()), 1)
    share = np.floor(exact).astype(np.int64)
    extra = np.argsort(-(exact - share), kind="stable")[: n_test - int(share.sum())]
    share[extra] += 1
    return np.minimum(share, counts)


def held_out(comm, seed: int, offset: int, codes: np.ndarray, share: np.ndarray) -> np.ndarray:
    """early_stopping's validation rows among this rank's (a mask; collective): of class c,
    the ``share[c]`` rows of every rank with the smallest :func:`row_hash`, the same rows for
    every P. Each class's threshold is found by bisection over the hashes' 64 bits, a small
    sum of counts over the ranks a step: no rank gathers the others' hashes."""
    codes = np.asarray(codes, dtype=np.int64)
    z = row_hash(seed, offset, codes.size)
    k = share.size
    lo, hi = np.zeros(k, dtype=np.uint64), np.full(k, np.iinfo(np.uint64).max, dtype=np.uint64)
    while np.any(lo < hi):  # (lo and hi agreed: every rank loops alike)
        mid = lo + (hi - lo) // np.uint64(2)
        below = comm.sum_(np.bincount(codes[z <= mid[codes]], minlength=k).astype(np.int64))
        enough = np.asarray(below) >= share
        hi, lo = np.where(enough, mid, hi), np.where(enough, lo, mid + np.uint64(1))
    return (z <= lo[codes]) & (share[codes] > 0)  # (hashes are distinct: share[c] rows)


@dataclass
class LocalProblem:
    """One rank's rows in the kernels' dtypes, with the one-vs-rest wiring.

    Model c treats class code ``pos_code[c]`` as +1 with weight ``pos_w[c]``
    and the rest as -1 with weight ``neg_w[c]`` (scikit-learn's scheme).
    """

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    codes: np.ndarray
    sw: np.ndarray
    n_features: int
    n_samples: int
    n_local_max: int
    pos_code: np.ndarray
    pos_w: np.ndarray
    neg_w: np.ndarray
    val: tuple | None = None
    val_weight: float = 0.0  # of every rank's validation rows

    @property
    def n_local(self) -> int:
        return self.codes.size

    @property
    def n_models(self) -> int:
        return self.pos_code.size

    def permuted(self, perm: np.ndarray) -> LocalProblem:
        """The same problem with the local training rows stored in ``perm`` order."""
        X = sp.csr_matrix(
            (self.data, self.indices, self.indptr), shape=(self.n_local, self.n_features)
        )[perm]
        indptr, indices, data = csr_arrays(canonical_csr(X))
        return LocalProblem(
            indptr,
            indices,
            data,
            self.codes[perm],
            self.sw[perm],
            self.n_features,
            self.n_samples,
            self.n_local_max,
            self.pos_code,
            self.pos_w,
            self.neg_w,
            self.val,
            self.val_weight,
        )


def make_problem(
    comm, X, codes, n_classes: int, *, sample_weight=None, class_weight=None, validation=None
) -> LocalProblem:
    """Wire a rank's rows (class codes 0..n_classes-1) into a LocalProblem; collective.

    ``class_weight`` is an array of one weight per class code; ``validation``
    is this rank's ``(X_val, codes_val, weights_val)`` (codes -1 for unseen labels; weights
    None: each row counts 1).
    """
    indptr, indices, data = csr_arrays(canonical_csr(X))
    codes = np.ascontiguousarray(codes, dtype=np.int64)
    n = codes.size
    sw = np.ones(n) if sample_weight is None else np.require(sample_weight, np.float64, ["C"])
    cw = np.ones(n_classes) if class_weight is None else np.asarray(class_weight, np.float64)
    if n_classes == 2:  # one model: class 1 positive (scikit-learn's coef_ convention)
        pos_code, pos_w, neg_w = np.array([1]), cw[1:2].copy(), cw[0:1].copy()
    else:
        pos_code, pos_w, neg_w = np.arange(n_classes), cw.copy(), np.ones(n_classes)
    val = None
    if validation is not None:
        X_val, codes_val, w_val = validation
        w_val = np.ones(len(codes_val)) if w_val is None else w_val
        val = (
            *csr_arrays(canonical_csr(X_val)),
            np.ascontiguousarray(codes_val, dtype=np.int64),
            np.ascontiguousarray(w_val, dtype=np.float64),
        )
    counts = comm.sum_(np.array([n, 0.0 if val is None else float(val[-1].sum())]))
    return LocalProblem(
        indptr,
        indices,
        data,
        codes,
        sw,
        int(X.shape[1]),
        int(counts[0]),
        int(comm.max_(n)),
        pos_code.astype(np.int64),
        pos_w,
        neg_w,
        val,
        float(counts[1]),
    )


def _physical_memory() -> int | None:
    """The machine's memory in bytes, where the OS tells it."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def check_model_memory(comm, n_models: int, n_features: int, source: str) -> None:
    """Refuse, on every rank alike, a model whose weights cannot fit the node: a rank holds
    at least six arrays of them (the weights, their average, the synchronisation's sums of
    both, the result and its copy), and the node's ranks share its memory (a collective).
    One feature index of 2**31 - 1 in a file made numpy's MemoryError a traceback.
    ``source`` says where the width comes from ("X has 10 features")."""
    local = comm.local_size()
    need, have = 6 * 8 * n_models * n_features * local, _physical_memory()
    error = None
    if have is not None and need > have:
        ranks = f"{local} ranks" if local > 1 else "one rank"
        error = ValueError(
            f"{source}: a linear model of {n_models} x {n_features} weights needs at least "
            f"{need / 2**30:.1f} GiB for {ranks} on this node, more than its "
            f"{have / 2**30:.1f} GiB of memory"
        )
    comm.agree(error)


@dataclass
class SGDState:
    """Everything a rank needs to continue training (``partial_fit``, more epochs)."""

    V: np.ndarray
    scale: np.ndarray
    b: np.ndarray
    U: np.ndarray
    csum: np.ndarray
    bsum: np.ndarray
    st: np.ndarray
    rng: np.random.Generator
    epoch: int = 0
    objectives: list = field(default_factory=list)

    @classmethod
    def zeros(cls, n_models: int, n_features: int, seed: int, rank: int) -> SGDState:
        k, d = n_models, n_features
        return cls(
            np.zeros((k, d)),
            np.ones(k),
            np.zeros(k),
            np.zeros((k, d)),
            np.zeros(k),
            np.zeros(k),
            np.zeros(steps.N_ST),
            np.random.default_rng([int(seed), int(rank)]),
        )
