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


NO_DATA = (
    f"real LIBSVM data sets not found at {SHARED_DATA}: set PSVM_SHARED_DATA to a folder "
    "holding them as NAME.xz (README.md, 'Running the tests')"
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Every skip for missing data at one location (this file), so -ra folds them into one line."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and NO_DATA in report.longrepr[2]:
        report.longrepr = (__file__, None, report.longrepr[2])
    return report


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real data sets; tests that need it skip (not fail) without it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(NO_DATA)
    return SHARED_DATA
