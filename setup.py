"""setuptools' build, plus psvm's numba code compiled into numba's disk cache (#14).

After the usual build step, ``python -m psvm.precompile`` runs on the built modules (the
source tree for an editable install), so that the first psvm-train after installing loads
compiled code instead of compiling it for 10-25 s. numba's cache sits in the ``__pycache__``
folders next to the modules and is used where numba finds it valid: the same numba, the
same CPU, and the same sources (:func:`psvm.jit.compiled_sources_stamp`); elsewhere numba
compiles at first use as before. ``PSVM_PRECOMPILE=0`` skips it. A failure here only warns.
"""

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
        if os.environ.get("PSVM_PRECOMPILE", "1") == "0":
            return
        here = os.path.dirname(os.path.abspath(__file__))
        root = here if self.editable_mode else os.path.abspath(self.build_lib)
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        command = [sys.executable, "-m", "psvm.precompile"]
        # one process of its own: not a rank of a job whose launcher ran pip (srun pip ...)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "PMIX_"))}
        env["PYTHONPATH"] = path
        with tempfile.TemporaryDirectory() as cwd:  # not the tree: psvm comes from root
            # its own session: a timeout ends the compiling processes too
            proc = subprocess.Popen(command, env=env, cwd=cwd, start_new_session=True)
            try:
                code = proc.wait(timeout=600)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                code = "timed out"
        if code != 0:
            print(f"psvm: numba code not compiled ahead ({code}); the first run compiles it")


setup(cmdclass={"build_py": BuildPy})
