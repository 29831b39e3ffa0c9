"""Without the real data sets the suite skips what needs them, in one line, and runs the rest."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pytest(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PSVM_SHARED_DATA="/nonexistent/psvm-data")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_data_tests_skip_with_one_line_saying_where_the_data_goes():
    proc = _pytest("tests/unit/test_shard.py", "-k", "labels_in_order or serial_equals_read")
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:]
    assert "error" not in out.lower().split("short test summary")[-1], out[-3000:]
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 1, out[-3000:]
    assert "SKIPPED [2]" in skips[0]
    assert "/nonexistent/psvm-data" in skips[0] and "PSVM_SHARED_DATA" in skips[0]
    assert "1 passed, 2 skipped" in out


def test_a_run_in_which_nothing_passed_still_fails():
    proc = _pytest("tests/unit/test_shard.py", "-k", "serial_equals_read")
    assert "2 skipped" in proc.stdout
    assert proc.returncode != 0
