"""Every elimination heuristic gives the same model for P = 1, 2, 3 ranks."""

import json

import numpy as np
import pytest

from tests._helpers import run_mpi
from tests._svm import write_head

SETS = [("a9a.xz", "a9a.t.xz", 1500, 1.0, 0.05), ("ijcnn1.xz", "ijcnn1.t.xz", 1500, 1.0, 1.0)]


@pytest.mark.parametrize("train, test, rows, C, gamma", SETS)
def test_heuristics_do_not_depend_on_ranks(tmp_path, shared_data, train, test, rows, C, gamma):
    tr = write_head(shared_data / train, tmp_path / "train.txt", rows)
    te = write_head(shared_data / test, tmp_path / "test.txt", 1000)
    results = {}
    for n in (1, 2, 3):
        out = tmp_path / f"r{n}.json"
        r = run_mpi("run_heuristics.py", [tr, te, out, C, gamma], n, timeout=300)
        assert r.returncode == 0, r.stderr
        results[n] = json.loads(out.read_text())
    none = results[1]["none/single"]
    for combo, ref in results[1].items():
        assert ref["objective"][0] == pytest.approx(none["objective"][0], rel=1e-3), combo
        assert np.mean(np.array(ref["pred"]) == none["pred"]) >= 0.999, combo
        for n in (2, 3):
            got = results[n][combo]
            assert got["objective"][0] == pytest.approx(ref["objective"][0], rel=1e-6), combo
            assert got["support"] == ref["support"], combo
            assert got["pred"] == ref["pred"], combo
            np.testing.assert_allclose(got["rho"], ref["rho"], rtol=1e-9, atol=1e-12)
    assert results[2]["earliest/single"]["eliminated"] > 0
    print({n: {c: r["lent"] for c, r in results[n].items()} for n in (2, 3)})
