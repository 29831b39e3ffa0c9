"""Parameters only the faces see: the data layout, the communicator, the shape of outputs.

The solvers take validated configs (:mod:`psvm._params`); these parameters
choose where and how a fit runs, so the faces check them before it starts.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from sklearn.utils import check_random_state

from psvm._params import DEFAULT_HEURISTIC, HEURISTICS, ParameterError, check_bool
from psvm.comm import Comm, mpi_worker, world

DISTRIBUTED = ("replicated", "sharded")


class SharedComm:
    """The ``comm`` parameter of psvm's estimators: not pickled (an MPI handle means nothing
    in another process, so a loaded estimator has ``comm=None``), shared by reference by
    :func:`copy.deepcopy` and :func:`~sklearn.base.clone` (a copy would train on the world
    communicator instead). Before :class:`~sklearn.base.BaseEstimator` in the bases."""

    def __getstate__(self):
        state = super().__getstate__()
        if state.get("comm") is not None:
            state = {**state, "comm": None}
        return state

    def __deepcopy__(self, memo):
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            setattr(new, k, v if k == "comm" else copy.deepcopy(v, memo))
        return new

    def __sklearn_clone__(self):
        if self.comm is None:
            return super().__sklearn_clone__()
        shallow = copy.copy(self)  # through __getstate__: comm=None
        new = shallow.__sklearn_clone__()
        new.comm = self.comm  # one communicator, shared by reference
        return new


def resolve_heuristic(shrinking, heuristic) -> str:
    """``heuristic`` when given, else from ``shrinking``: True -> the default, False -> 'none'."""
    if heuristic is not None:
        return heuristic  # checked against HEURISTICS by validate_svc_params
    if isinstance(shrinking, (bool, np.bool_)):
        return DEFAULT_HEURISTIC if shrinking else "none"
    if isinstance(shrinking, str) and shrinking in HEURISTICS:
        return shrinking
    raise ParameterError(
        f"shrinking must be a bool or one of {list(HEURISTICS)}, got {shrinking!r}"
    )


def check_distributed(distributed) -> None:
    if distributed not in DISTRIBUTED:
        raise ParameterError(f"distributed must be one of {list(DISTRIBUTED)}, got {distributed!r}")


# the estimators' parameters that check_face_params checks (those a type has)
FACE_PARAMS = ("decision_function_shape", "random_state", "break_ties")


def check_face_params(
    *, distributed, n_jobs, decision_function_shape="ovr", random_state=None, break_ties=False
) -> None:
    """Parameters the solver never sees; each error names the parameter."""
    check_distributed(distributed)
    check_bool("break_ties", break_ties)
    if decision_function_shape not in ("ovo", "ovr"):
        raise ParameterError(
            f"decision_function_shape must be 'ovo' or 'ovr', got {decision_function_shape!r}"
        )
    if n_jobs is not None and (
        isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0
    ):
        raise ParameterError(f"n_jobs must be None or a non-zero int, got {n_jobs!r}")
    try:
        check_random_state(random_state)
    except ValueError:
        raise ParameterError(
            f"random_state must be None, an int or a numpy RandomState, got {random_state!r}"
        ) from None


@contextmanager
def fit_comm(comm, distributed: str = "replicated") -> Iterator[Comm]:
    """The Comm of one fit: the world for None, else a duplicate of ``comm``, freed afterwards.

    In a worker process of a rank (joblib's ``n_jobs``, multiprocessing) the
    fit runs as one process, ``comm`` or not: it cannot join the MPI job.
    Replicated data is the whole set there; sharded data would be one rank's
    rows only, so it is refused.
    """
    # (a worker given no comm fits alone anyway: mpi_worker reads the environment, 4 µs)
    if (comm is not None or distributed == "sharded") and mpi_worker():
        if distributed == "sharded":
            raise ParameterError(
                "distributed='sharded' in a worker process of an MPI job (joblib n_jobs, "
                "multiprocessing): the worker cannot join the job and holds one rank's rows "
                "only; use n_jobs=1, or replicated data"
            )
        comm = None
    if comm is None:
        yield world()
        return
    dup = Comm(comm)
    try:
        yield dup
    finally:
        dup.free()
