"""Checkpoint and resume of a C-SVC training run (``--checkpoint``, ``--resume``).

A checkpoint holds the state of the binary problem being solved (alpha, G as
the solver holds it, the stale rows' departures and their alpha snapshots,
active set, window, streaks, iteration count, the gap thresholds still ahead),
the alphas and results of the class pairs already solved, and a fingerprint of
the data and parameters. Arrays are stored in global row order, so a run can
resume with any number of ranks.
Rank 0 writes the file atomically: a kill leaves the previous checkpoint
whole. The state is saved between two iterations and restored exactly, so the
resumed run takes the same steps as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from psvm.comm.process import Terminated
from psvm.io.atomic import remove_leftovers, write_atomic

# per-row arrays of the solver state, saved in global order; "epoch" and "snapshots" (a column
# per departure) are the stale rows' departures, so a resumed run continues the same arithmetic
STATE_ARRAYS = ("alpha", "G", "active", "streak", "window", "epoch", "snapshots")


# what a saved solver state holds (resume.py reads each)
_STATE_KEYS = ("alpha", "G", "active", "streak", "window", "n_iter", "gaps", "unshrunk", "gap0")


def _check_state(state: dict, n: int) -> None:
    """A KeyError or ValueError unless ``state`` holds every part, ``n`` rows of each array
    and finite alpha and G."""
    for k in _STATE_KEYS:
        if k not in state:
            raise KeyError(k)
    for k in STATE_ARRAYS:
        if k in state and len(state[k]) != n:
            raise ValueError(f"{k!r} holds {len(state[k])} of this rank's {n} rows")
    if not (np.isfinite(state["alpha"]).all() and np.isfinite(state["G"]).all()):
        raise ValueError("alpha or G is not finite")


def _not_ours(path: str) -> str:
    return f"checkpoint {path!r} cannot be read: it is not an .npz file that psvm wrote"


class CheckpointError(ValueError):
    """The checkpoint file cannot be read or belongs to another run."""

    collective = True  # every rank reads the same file and agrees before raising


@dataclass(frozen=True)
class CheckpointConfig:
    """Where and how often to checkpoint.

    ``seconds``: rank 0's wall clock since the last write; ``iters``: every
    that many solver iterations (0: off). ``resume``: continue from ``path``
    if it exists, else start afresh. ``at_end``: also write it once every class pair is
    solved, for work after them that keeps no checkpoint (``-b 1``'s folds).
    """

    path: str
    seconds: float = 600.0
    iters: int = 0
    resume: bool = False
    at_end: bool = False


def saved_before_folds(config: CheckpointConfig | None) -> CheckpointConfig | None:
    """``config`` (if any) that also writes the file once every class pair is solved:
    ``-b 1``'s folds come next and keep no checkpoint."""
    return None if config is None else dataclasses.replace(config, at_end=True)


@contextmanager
def folds_after(config: CheckpointConfig | None) -> Iterator[None]:
    """Around the folds after :func:`saved_before_folds`' pairs: a SIGTERM there says what
    the checkpoint holds (its stop line)."""
    try:
        yield
    except Terminated as e:
        if config is not None and e.checkpoint is None:
            e.saved = "the checkpoint holds every class pair; --resume redoes only -b 1's folds"
        raise


def make_checkpoint_config(
    path: str | os.PathLike | None, seconds: float = 600.0, iters: int = 0, resume: bool = False
) -> CheckpointConfig | None:
    """Validated settings; None when ``path`` is None (no checkpoints)."""
    from psvm._params import ParameterError, check_bool, check_number

    resume = check_bool("resume", resume)
    check_number("checkpoint_seconds", seconds, low=0)
    check_number("checkpoint_iters", iters, kind=numbers.Integral, low=0)
    if path is None:
        if resume:
            raise ParameterError("resume needs a checkpoint path, got checkpoint=None")
        return None
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ParameterError(f"checkpoint must be a file path or None, got {path!r}")
    return CheckpointConfig(os.fspath(path), float(seconds), int(iters), resume)


def _row_hash(gidx: np.ndarray, values: np.ndarray) -> int:
    """Order-free integer hash of (row, value) pairs; int64 sums wrap, so any split gives it."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
    with np.errstate(over="ignore"):
        return int(np.sum(bits * (gidx.astype(np.int64) * 2 + 1), dtype=np.int64))


def fingerprint(comm, shard, C_row: np.ndarray, cfg, classes, gamma) -> str:
    """The run's identity: parameters that change the result and a hash of X, y and C_t.

    ``gamma`` is the setting ('scale', 'auto' or a number), not ``cfg``'s resolved float.
    """
    X = shard.X
    gidx = shard.offset + np.arange(X.shape[0])
    row_of_nz = np.repeat(gidx, np.diff(X.indptr))
    local = (
        _row_hash(row_of_nz * (shard.n_features + 1) + X.indices, X.data),
        _row_hash(gidx, shard.y),
        _row_hash(gidx, C_row),
    )
    hashes = [sum(h) % 2**64 for h in zip(*comm.allgather_obj(local), strict=True)]  # any P
    params = {k: v for k, v in dataclasses.asdict(cfg).items() if _changes_result(k, cfg)}
    if "gamma" in params:
        params["gamma"] = gamma
    ident = {
        "params": params,
        "classes": [float(c) for c in classes],
        "n_samples": int(shard.n_samples),
        "n_features": int(shard.n_features),
        "hash": hashes,
    }
    return json.dumps(ident, sort_keys=True, default=str)


# the parameters that only some SVM types or kernels read, as svm.cpp: the others resume
# whatever these say (svm-train -s 0 ignores -n and -p)
_READ_BY = {
    "C": ("c_svc", "epsilon_svr", "nu_svr"),
    "nu": ("nu_svc", "one_class", "nu_svr"),
    "epsilon": ("epsilon_svr",),
    "degree": ("poly",),
    "coef0": ("poly", "sigmoid"),
    "gamma": ("rbf", "poly", "sigmoid"),
}


def _changes_result(name: str, cfg) -> bool:
    """Whether parameter ``name`` of ``cfg`` changes the solution (the cache's size and the
    verbosity never do)."""
    if name in ("cache_size", "verbose"):
        return False
    readers = _READ_BY.get(name)
    return readers is None or cfg.svm_type in readers or cfg.kernel in readers


class Checkpoint:
    """One training run's checkpoint file: what it resumes from and when it writes.

    Collective: every method that reads or writes state is called by all ranks
    at the same point of the loop.
    """

    def __init__(self, comm, config: CheckpointConfig, identity: str):
        self.comm, self.cfg, self.identity = comm, config, identity
        if comm.rank == 0:  # (a run killed while it wrote left its temporary file)
            remove_leftovers(config.path)
        self.finished: list[dict] = []  # results of solved pairs (global alpha on rank 0)
        self.saved: dict | None = None
        self._last = time.monotonic()
        if config.resume:
            self._load()

    def _load(self) -> None:
        """Read the file on every rank (collective; an unreadable file fails on all)."""
        error = None
        try:
            if os.path.exists(self.cfg.path):
                if not zipfile.is_zipfile(self.cfg.path):  # (np.load would hint at pickles)
                    raise CheckpointError(_not_ours(self.cfg.path))
                with np.load(self.cfg.path, allow_pickle=False) as z:
                    try:
                        saved = {k: z[k] for k in z.files}
                    except ValueError:  # object arrays (numpy would hint at unpickling)
                        raise CheckpointError(_not_ours(self.cfg.path)) from None
                if "identity" not in saved:
                    raise CheckpointError(_not_ours(self.cfg.path))
                if str(saved["identity"]) != self.identity:
                    raise CheckpointError(
                        f"checkpoint {self.cfg.path!r} was written by a run with other data or "
                        "parameters; remove it, or drop --resume (an estimator's resume=True)"
                    )
                done = json.loads(str(saved["finished"]))
                self.finished = [dict(r, alpha=saved[f"pair{p}_alpha"]) for p, r in enumerate(done)]
                self.saved = saved
        except CheckpointError as exc:
            error = exc
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            error = CheckpointError(f"checkpoint {self.cfg.path!r} cannot be read: {exc}")
        self.comm.agree(error)

    # -- class pairs ---------------------------------------------------------
    def finished_pair(self, pair: int, offset: int, n_local: int) -> dict | None:
        """A solved pair's result with this rank's slice of alpha, if the checkpoint has it."""
        if pair >= len(self.finished):
            return None
        r = self.finished[pair]
        return dict(r, alpha=np.array(r["alpha"][offset : offset + n_local]))

    def pair_solved(self, pair: int, alpha: np.ndarray, result: dict) -> None:
        """Keep a solved pair (collective: alpha is gathered on rank 0)."""
        if pair < len(self.finished):
            return
        self.finished.append(dict(result, alpha=self.comm.gatherv(alpha)))

    def solver_state(self, pair: int, offset: int, n_local: int) -> dict | None:
        """The saved state of ``pair``'s solver, sliced to this rank's rows."""
        s = self.saved
        if s is None or int(s["pair"]) != pair:
            return None
        state, error = {}, None
        try:
            for k in STATE_ARRAYS:
                if f"state_{k}" in s:
                    state[k] = s[f"state_{k}"][offset : offset + n_local]
            state.update(json.loads(str(s["state_scalars"])))
            _check_state(state, n_local)
        except (KeyError, ValueError, TypeError) as exc:  # a file damaged after psvm wrote it
            why = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
            error = CheckpointError(
                f"checkpoint {self.cfg.path!r} cannot be read: its solver state is damaged "
                f"({why}); remove it"
            )
        self.comm.agree(error)  # (a rank's rows may be the damaged ones)
        return state

    def _gather(self, local: np.ndarray) -> np.ndarray | None:
        """A per-row array (1-D, or 2-D with a column per snapshot) in global row order on
        rank 0 (collective)."""
        out = self.comm.gatherv(local.ravel())
        return out.reshape(-1, local.shape[1]) if out is not None and local.ndim == 2 else out

    # -- iterations ----------------------------------------------------------
    def next_save(self) -> float:
        """The monotonic time of the next save by the clock (rank 0's counts; inf: none)."""
        return self._last + self.cfg.seconds if self.cfg.seconds > 0 else float("inf")

    def due(self, n_iter: int, flag: float) -> bool:
        """Whether to save now: rank 0's clock flag or the iteration interval."""
        it = self.cfg.iters
        return flag > 0 or (it > 0 and n_iter > 0 and n_iter % it == 0)

    def save(self, pair: int, arrays: dict, scalars: dict) -> None:
        """Write the file (collective): the pair being solved and its local state arrays (the
        number of pairs and none: every pair solved)."""
        gathered = {f"state_{k}": self._gather(arrays[k]) for k in STATE_ARRAYS if k in arrays}
        error = None
        if self.comm.rank == 0:

            def results(r: dict) -> dict:
                return {k: v for k, v in r.items() if k != "alpha"}

            out = {
                "identity": np.array(self.identity),
                "pair": np.array(pair),
                "state_scalars": np.array(json.dumps(scalars)),
                "finished": np.array(json.dumps([results(r) for r in self.finished])),
                **gathered,
                **{f"pair{p}_alpha": r["alpha"] for p, r in enumerate(self.finished)},
            }
            try:
                with write_atomic(self.cfg.path, "wb") as f:
                    np.savez(f, **out)
            except OSError as exc:
                error = CheckpointError(f"cannot write checkpoint {self.cfg.path!r}: {exc}")
        self.comm.agree(error)
        self._last = time.monotonic()
