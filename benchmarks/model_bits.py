"""Fingerprints of trained models, to check that a speed change left every model bit alone.

    python benchmarks/model_bits.py > before.txt      # on the commit before
    python benchmarks/model_bits.py > after.txt       # on the change
    diff before.txt after.txt                          # no output: the same bits

One process fits 13 estimators (C-SVC on toy sets, with an RBF and a polynomial kernel, with
class weights, on a9a's first 3,000 rows at C = 1 and 100; nu-SVC, epsilon-SVR, nu-SVR and
one-class) and prints, per fit, a hash of ``dual_coef_``, ``intercept_``, ``support_`` and
``n_iter_``. A change that only makes passes faster must print the same lines; a change of
the arithmetic or of a tie-break shows as a different hash. The model's independence of P is
checked by the suite (tests/test_mpi_same_bits.py); this script covers what one process
computes. LIBSVM sets come from ``$PSVM_SHARED_DATA`` (default ``../shared/data``).
"""

from __future__ import annotations

import argparse
import hashlib

import numpy as np

from heuristics.bench import data_dir, head_path, load_csr


def fingerprint(model) -> str:
    digest = hashlib.sha1()
    for name in ("dual_coef_", "intercept_", "support_", "n_iter_"):
        value = getattr(model, name, None)
        if value is None:
            continue
        value = value.toarray() if hasattr(value, "toarray") else np.asarray(value)
        digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()[:12]


def libsvm(name: str, rows: int | None = None):
    """The first ``rows`` rows of a shared LIBSVM set as CSR with 32-bit indices."""
    return load_csr(head_path(data_dir() / f"{name}.xz", rows), None)


def cases():
    from sklearn import datasets
    from sklearn.preprocessing import StandardScaler

    import psvm

    def toy(name, scale=False, divide=1.0):
        X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
        return (StandardScaler().fit_transform(X) if scale else X / divide), y

    iris, a9a, cpusmall = toy("iris"), libsvm("a9a", 3000), libsvm("cpusmall_scale", 3000)
    return [
        ("iris", psvm.SVC(), iris),
        ("iris poly", psvm.SVC(kernel="poly", gamma=1), iris),
        ("wine std", psvm.SVC(), toy("wine", scale=True)),
        ("breast_cancer std", psvm.SVC(), toy("breast_cancer", scale=True)),
        ("digits /16", psvm.SVC(), toy("digits", divide=16.0)),
        ("make_classification C=10", psvm.SVC(C=10), datasets.make_classification(
            5000, 20, n_informative=10, random_state=0)),
        ("a9a 3000 C=1", psvm.SVC(gamma=0.05), a9a),
        ("a9a 3000 C=100", psvm.SVC(C=100, gamma=0.05), a9a),
        ("heart_scale nu-SVC", psvm.NuSVC(), libsvm("heart_scale")),
        ("iris class weights", psvm.SVC(class_weight={0: 2.0, 1: 0.5}), iris),
        ("cpusmall 3000 SVR", psvm.SVR(C=10, epsilon=0.1, gamma=0.5), cpusmall),
        ("abalone 1500 nu-SVR", psvm.NuSVR(C=10), libsvm("abalone_scale", 1500)),
        ("a9a 3000 one-class", psvm.OneClassSVM(nu=0.1, gamma=0.05), a9a),
    ]  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--only", default="", help="comma-separated case names")
    only = {s for s in p.parse_args().only.split(",") if s}
    for name, model, (X, y) in cases():
        if not only or name in only:
            print(f"{name:26s} {fingerprint(model.fit(X, y))}", flush=True)


if __name__ == "__main__":
    main()
