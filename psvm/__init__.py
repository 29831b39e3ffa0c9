"""psvm: parallel support vector machines over MPI.

``psvm.SVC``, ``psvm.NuSVC``, ``psvm.SVR``, ``psvm.NuSVR`` and ``psvm.OneClassSVM`` train
exact kernel SVMs (every LIBSVM svm_type) with a distributed SMO solver;
``psvm.SGDSVC`` a linear SVM by parallel SGD with tuned model synchronisation;
the command lines ``psvm-train`` / ``psvm-predict`` follow LIBSVM.
Heavy modules are imported lazily so command-line start-up stays short.
"""

__version__ = "0.1.0"

__all__ = ["SGDSVC", "SVC", "NuSVC", "SVR", "NuSVR", "OneClassSVM", "__version__"]


def __getattr__(name):
    if name in ("SVC", "NuSVC"):
        import psvm.estimator

        return getattr(psvm.estimator, name)
    if name in ("SVR", "NuSVR"):
        import psvm.svr

        return getattr(psvm.svr, name)
    if name == "OneClassSVM":
        from psvm.one_class import OneClassSVM

        return OneClassSVM
    if name == "SGDSVC":
        from psvm.sgd.estimator import SGDSVC

        return SGDSVC
    raise AttributeError(f"module 'psvm' has no attribute {name!r}")
