"""psvm-train -b 1 under mpiexec: the internal folds run on the distributed engine and the
model file, probA/probB included, has the same bits for P = 1, 2 and 3 (#18)."""

from psvm.io.model_file import read_model
from tests._svm import run_cli, write_head


def test_probability_model_same_bits_for_every_p(shared_data, tmp_path):
    data = write_head(shared_data / "usps.t.xz", tmp_path / "usps", 600)  # 10 classes: 45 pairs
    files = {}
    for n in (1, 2, 3):
        model = tmp_path / f"m{n}"
        r = run_cli("psvm.cli.train", ["-q", "-b", "1", "-g", "0.01", data, model], n, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        files[n] = model.read_bytes()
    assert len(read_model(tmp_path / "m1").meta["probB"]) == 45
    assert files[2] == files[1] and files[3] == files[1]
    out = {}
    for n in (1, 3):
        r = run_cli("psvm.cli.predict", ["-b", "1", data, tmp_path / "m1", tmp_path / f"o{n}"], n)
        assert r.returncode == 0, r.stderr[-3000:]
        out[n] = (tmp_path / f"o{n}").read_text()
    assert out[3] == out[1] and out[1].startswith("labels ")
