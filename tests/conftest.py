"""Suite-wide settings: real data paths, and a run in which nothing passed fails."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PSVM_SHARED_DATA", REPO.parent / "shared" / "data"))


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and exitstatus == 0 and not reporter.stats.get("passed"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"real benchmark data not found at {SHARED_DATA} (set PSVM_SHARED_DATA)")
    return SHARED_DATA
