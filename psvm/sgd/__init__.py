"""Parallel SGD linear SVM with a tuned model synchronisation frequency (MSF).

``steps`` holds the numba kernels, ``problem`` a rank's rows and model state,
``trainer`` the epoch loop with its model averages, ``msf`` the sync-period
policies, ``model`` the fitted linear model (its LIBLINEAR text format is in
:mod:`psvm.io.linear_model_file`), ``estimator`` :class:`SGDSVC`. Submodules
are imported lazily so that ``import psvm`` stays cheap.
"""

__all__ = ["SGDSVC"]


def __getattr__(name):
    if name == "SGDSVC":
        from psvm.sgd.estimator import SGDSVC

        return SGDSVC
    raise AttributeError(f"module 'psvm.sgd' has no attribute {name!r}")
