"""setuptools' build, plus psvm's numba code compiled into numba's disk cache (#14).

After the usual build step, ``python -m psvm.precompile`` runs on the built modules (the
source tree for an editable install), so that the first psvm-train after installing loads
compiled code instead of compiling it for 10-25 s. numba's cache sits in the ``__pycache__``
folders next to the modules and is used where numba finds it valid: the same numba, the
same CPU, and the same sources (:func:`psvm.jit.psvm_sources_stamp`); elsewhere numba
compiles at first use as before. ``PSVM_PRECOMPILE=0`` skips it (pip still builds in an
environment with psvm-train's dependencies), and so does ``NUMBA_DISABLE_JIT``. A failure only
prints a line, which pip shows with ``-v``; ``python -m psvm.precompile`` compiles later.
"""

import contextlib
import os
import signal
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    def run(self):
        super().run()
        if os.environ.get("PSVM_PRECOMPILE", "1") == "0" or _truthy("NUMBA_DISABLE_JIT"):
            return
        editable = getattr(self, "editable_mode", False)
        root = os.path.dirname(os.path.abspath(__file__)) if editable else self.build_lib
        # a process of its own: not a rank of a job whose launcher ran pip (srun pip ...)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "PMIX_"))}
        if not editable:  # the cache goes into the wheel, next to the modules
            env.pop("NUMBA_CACHE_DIR", None)
        path = [os.path.abspath(root), env.get("PYTHONPATH")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
        with tempfile.TemporaryDirectory() as cwd:  # not the tree: psvm comes from root
            # its own session, so that ending it (timeout, Ctrl-C) ends both parts too
            proc = subprocess.Popen(
                [sys.executable, "-m", "psvm.precompile"], env=env, cwd=cwd, start_new_session=True
            )
            try:
                code = proc.wait(timeout=600)
            except subprocess.TimeoutExpired:
                code = "timed out"
            finally:  # whatever ended the wait, no compile outlives it
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if code != 0:  # pip shows it with -v only
            print(f"psvm: numba code not compiled ahead ({code}); the first run compiles it")


def _truthy(name: str) -> bool:
    return os.environ.get(name, "0").strip() not in ("", "0")


setup(cmdclass={"build_py": BuildPy})
