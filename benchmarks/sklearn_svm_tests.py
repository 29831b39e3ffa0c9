"""scikit-learn's own SVM tests on psvm: NuSVC, SVR, NuSVR and OneClassSVM substituted (#17).

    python benchmarks/sklearn_svm_tests.py            # table of the tests that reach psvm
    python benchmarks/sklearn_svm_tests.py --all      # also the tests that never do

Runs ``sklearn/svm/tests/test_svm.py`` and ``test_sparse.py`` of the installed
scikit-learn, unchanged, in a pytest process that loads this file as a plugin
(``-p sklearn_svm_tests``). Before the test modules are imported, the plugin
replaces ``sklearn.svm.NuSVC``, ``SVR``, ``NuSVR`` and ``OneClassSVM`` by psvm's
classes, so ``svm.NuSVC(...)`` and ``from sklearn.svm import SVR`` in the tests
give psvm's. ``SVC``, ``LinearSVC``, ``LinearSVR`` and ``l1_min_c`` stay
scikit-learn's.

A test counts as psvm's when it constructs one of the four (``clone`` included)
or is parametrised with one (class or instance); the others only exercise
scikit-learn's own classes and are left out of the table unless ``--all``.
Every psvm failure is explained in docs/estimator_checks.md, "scikit-learn's own
SVM tests"; tests/test_sklearn_svm_tests.py checks that the failures are
exactly the ones listed there.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUBSTITUTED = ("NuSVC", "SVR", "NuSVR", "OneClassSVM")
TEST_FILES = ("test_svm.py", "test_sparse.py")

# -- the pytest plugin (runs inside the pytest process) ------------------------------------------
_constructed: set[str] = set()  # psvm classes constructed by the running test
_results: dict[str, dict] = {}


def _counting_init(cls) -> None:
    """Wrap cls.__init__ to note each construction (signature kept for get_params)."""
    init = cls.__dict__["__init__"]

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        _constructed.add(type(self).__name__)
        init(self, *args, **kwargs)

    cls.__init__ = __init__


def pytest_addoption(parser):
    parser.addoption("--psvm-results", help="write the outcome of each test here (JSON)")


def pytest_configure(config):
    """Substitute psvm's classes before the test modules import sklearn.svm's names."""
    import sklearn.svm

    import psvm

    for name in SUBSTITUTED:
        cls = getattr(psvm, name)
        _counting_init(cls)
        setattr(sklearn.svm, name, cls)


def _test_id(nodeid: str) -> str:
    """'test_svm.py::test_x[...]' whatever the rootdir."""
    path, _, rest = nodeid.partition("::")
    return f"{Path(path).name}::{rest}"


def _psvm_name(value) -> str | None:
    """The name of the substituted class that value is or is an instance of, else None."""
    import psvm

    for name in SUBSTITUTED:
        cls = getattr(psvm, name)
        if value is cls or type(value) is cls:
            return name
    return None


def _reason(report) -> str:
    """One line: the first exception of the chain (the cause, e.g. psvm's TypeError inside
    ``pytest.warns``), or the skip reason."""
    longrepr = report.longrepr
    chain = getattr(longrepr, "chain", None)
    if chain:
        text = chain[0][1].message if chain[0][1] is not None else str(longrepr)
    elif isinstance(longrepr, tuple):  # a skip: (path, line, reason)
        text = longrepr[2]
    else:
        text = str(longrepr or "")
    return " ".join(text.split())


def pytest_runtest_protocol(item, nextitem):
    """Start the test's record: the substituted classes among its parameters, if any."""
    _constructed.clear()
    params = getattr(getattr(item, "callspec", None), "params", {})
    named = {_psvm_name(v) for v in params.values()} - {None}
    _results[_test_id(item.nodeid)] = {"outcome": "passed", "reason": "", "psvm": sorted(named)}


def pytest_runtest_logreport(report):
    """Fold the setup, call and teardown reports of a test into its record."""
    entry = _results[_test_id(report.nodeid)]
    if report.when == "call" and hasattr(report, "wasxfail"):
        entry["outcome"] = "xfailed" if report.skipped else "xpassed"
        entry["reason"] = report.wasxfail
    elif report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["reason"] = _reason(report)
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
        entry["reason"] = _reason(report)
    if report.when == "teardown":
        entry["psvm"] = sorted(set(entry["psvm"]) | _constructed)


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--psvm-results")
    if path:
        Path(path).write_text(json.dumps(_results, indent=1, sort_keys=True))


# -- the runner -----------------------------------------------------------------------------------
def sklearn_test_files() -> list[Path]:
    """The SVM test files of the installed scikit-learn."""
    import sklearn

    folder = Path(sklearn.__file__).resolve().parent / "svm" / "tests"
    return [folder / name for name in TEST_FILES]


def run(pytest_args: list[str] = (), seed: str = "42", timeout: float = 1800) -> dict[str, dict]:
    """Run scikit-learn's tests on psvm in a fresh pytest process: {test id: record}.

    A record has ``outcome`` (passed, failed, error, skipped, xfailed), a one-line
    ``reason`` and ``psvm``, the substituted classes the test reached (empty: it
    only exercises scikit-learn's own). ``seed``: scikit-learn's
    SKLEARN_TESTS_GLOBAL_RANDOM_SEED (part of the test ids).
    """
    files = sklearn_test_files()
    path = os.pathsep.join(
        filter(None, [str(REPO), str(REPO / "benchmarks"), os.environ.get("PYTHONPATH")])
    )
    env = {**os.environ, "PYTHONPATH": path, "SKLEARN_TESTS_GLOBAL_RANDOM_SEED": seed}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        cmd = [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "-p", "sklearn_svm_tests", f"--psvm-results={out}",
            # rootdir above sklearn/: its conftest.py (global_random_seed) is loaded
            f"--rootdir={files[0].parents[3]}", "-o", "addopts=",
            *map(str, files), *pytest_args,
        ]  # fmt: skip
        proc = subprocess.run(
            cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout
        )
        if not out.exists():
            raise RuntimeError(f"pytest wrote no results:\n{proc.stdout}\n{proc.stderr}")
        return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Other arguments go to pytest (e.g. -k oneclass).",
    )
    parser.add_argument("--all", action="store_true", help="also list tests that never reach psvm")
    parser.add_argument(
        "--seed", default="42", help="SKLEARN_TESTS_GLOBAL_RANDOM_SEED (default 42)"
    )
    parser.add_argument("--json", help="write every test's record here")
    args, pytest_args = parser.parse_known_args(argv)
    results = run(pytest_args, seed=args.seed)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True))
    ours = {t: r for t, r in results.items() if r["psvm"]}
    rows = sorted(results.items() if args.all else ours.items())
    width = max((len(t) for t, _ in rows), default=4)
    cw = max((len(",".join(r["psvm"])) for _, r in rows), default=1)
    print(f"{'test':<{width}}  {'psvm':<{cw}}  {'outcome':<7}  reason")
    for test_id, r in rows:
        classes = ",".join(r["psvm"]) or "-"
        print(f"{test_id:<{width}}  {classes:<{cw}}  {r['outcome']:<7}  {r['reason'][:160]}")
    for label, group in (
        ("reach psvm", ours),
        ("reach only scikit-learn's classes", {t: r for t, r in results.items() if not r["psvm"]}),
    ):
        counts = Counter(r["outcome"] for r in group.values())
        summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
        print(f"{len(group)} tests {label}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
