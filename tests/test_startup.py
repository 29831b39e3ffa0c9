"""What a warm run of the commands imports (docs/performance.md, start-up): not numpy.f2py or
numpy.testing, which scipy's import would load (:func:`psvm.cli._common.defer_numpy_modules`),
and on small problems not numba's array module, which an allocating compiled function would
load (:mod:`psvm.jit`)."""

from __future__ import annotations

import subprocess
import sys

from sklearn.datasets import dump_svmlight_file, load_iris

from tests._helpers import mpiexec
from tests.conftest import REPO

WATCHED = ("numba.np.arrayobj", "numpy.f2py.f2py2e", "numpy.testing._private.utils")

# a console run of psvm-train or psvm-predict that reports the watched modules it loaded
PROBE = f"""
import sys
import psvm.comm.process as process
end = process.end_process
def report(code):
    loaded = [m for m in {WATCHED!r} if m in sys.modules]
    print("loaded:", *loaded, file=sys.stderr, flush=True)
    end(code)
process.end_process = report
from psvm.cli import predict, train
command = sys.argv.pop(1)
sys.argv[0] = "psvm-" + command
(train if command == "train" else predict).main()
"""


def _run(cmd: list[str], cwd) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stderr


def test_warm_runs_of_small_problems_load_neither_f2py_nor_numbas_array_module(tmp_path):
    data = REPO / "data" / "breast_cancer"
    iris = tmp_path / "iris.txt"
    dump_svmlight_file(*load_iris(return_X_y=True), str(iris), zero_based=False)
    model = str(tmp_path / "m.model")
    probe = [sys.executable, "-c", PROBE]
    runs = [  # the README's job first
        [mpiexec(), "-n", "2", *probe, "train", "-c", "1", "-g", "0.05", f"{data}.train", model],
        [*probe, "predict", f"{data}.test", model, str(tmp_path / "out")],
        [*probe, "train", "-v", "3", f"{data}.train"],  # folds' predictions (serial sums)
        [*probe, "train", "-s", "1", f"{data}.train", model],  # nu: start from kernel sums
        [*probe, "train", "-s", "2", f"{data}.train", model],  # one-class
        [*probe, "train", "-t", "1", str(iris), model],  # reconstruction (epoch_sums)
    ]
    for run in runs:
        _run(run, tmp_path)  # compiles what the cache lacks
        reports = [line for line in _run(run, tmp_path).splitlines() if "loaded:" in line]
        command = run[run.index(PROBE) + 1 :]
        assert reports and all(line == "loaded:" for line in reports), (command, reports)


def test_deferred_numpy_modules_load_when_used():
    script = """
import sys
from psvm.cli._common import defer_numpy_modules
defer_numpy_modules()
import numpy, scipy.sparse
assert "numpy.f2py.f2py2e" not in sys.modules and "numpy.testing._private" not in sys.modules
from numpy.testing import assert_array_equal
assert_array_equal(numpy.arange(3), [0, 1, 2])
assert callable(numpy.f2py.run_main) and "numpy.f2py.f2py2e" in sys.modules
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.stdout.strip() == "ok", r.stderr[-3000:]
