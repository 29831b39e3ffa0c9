"""nu-SVC, one-class, epsilon-SVR and nu-SVR under mpiexec: the same model, bit for bit,
for every P (#17)."""

import json

import pytest

from tests._helpers import run_mpi
from tests._svm import run_cli, run_cli_batch, write_head

TRAIN = "psvm.cli.train"


def _fits(shared_data, n: int) -> dict:
    r = run_mpi("run_svm_types.py", ["--shared-data", shared_data], n, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_estimators_same_bits_for_every_p(shared_data):
    one = _fits(shared_data, 1)
    assert one["svr-replicated"] == one["svr-sharded"]
    for n in (2, 3):
        assert _fits(shared_data, n) == one, n


def test_cli_model_files_same_bits_for_every_p(shared_data, tmp_path):
    """psvm-train's model file of nu-SVC, one-class, epsilon-SVR and nu-SVR: the same for
    P = 1, 2 and 3, and with more ranks than rows (P = 5). The runs of one P share a launch."""
    heart, abalone = shared_data / "heart_scale.xz", shared_data / "abalone_scale.xz"
    data = {  # the regressors on the whole file: their cuts and reconstructions sum over an
        # SVR shard's variables, whose rank order is not their global order
        "1": write_head(heart, tmp_path / "heart"),
        "2": write_head(abalone, tmp_path / "abalone-500", 500),
        "3": write_head(abalone, tmp_path / "abalone"),
    }
    data["4"] = data["3"]
    tiny = {"1": data["1"], "2": write_head(abalone, tmp_path / "abalone-3", 3)}
    tiny["3"] = tiny["4"] = tiny["2"]
    runs = {1: [], 2: [], 3: [], 5: []}  # P -> (svm_type, training file)
    for t in data:
        runs[1] += [(t, data[t])] + ([(t, tiny[t])] if tiny[t] != data[t] else [])
        runs[2].append((t, data[t]))
        runs[3].append((t, data[t]))
        runs[5].append((t, tiny[t]))
    files = {}
    for n, pairs in runs.items():
        batch = []
        for t, path in pairs:
            files[t, n, path] = tmp_path / f"{t}-{n}-{path.rsplit('/', 1)[-1]}.model"
            batch.append(
                ["train", "-s", t, "-n", "0.2", "-q", "-g", "0.5", path, files[t, n, path]]
            )
        run_cli_batch(tmp_path, n, batch)
    files = {k: v.read_bytes() for k, v in files.items()}
    for t in data:
        one = files[t, 1, data[t]]
        assert files[t, 2, data[t]] == one and files[t, 3, data[t]] == one, t
        assert files[t, 5, tiny[t]] == files[t, 1, tiny[t]], t  # more ranks than rows
        kind = ("c_svc", "nu_svc", "one_class", "epsilon_svr", "nu_svr")[int(t)]
        assert one.startswith(b"svm_type " + kind.encode()), t
        assert (b"\nlabel " in one and b"\nnr_sv " in one) == (t == "1"), t


def test_cli_parameter_errors_on_every_rank(shared_data, tmp_path):
    data = write_head(shared_data / "abalone_scale.xz", tmp_path / "train", 50)
    for flags, message in (
        (["-s", "2", "-n", "1.5"], "option -n: nu must be <= 1, got 1.5"),
        (["-s", "3", "-p", "-1"], "option -p: epsilon must be >= 0, got -1.0"),
        (["-s", "5"], "-s 5: svm_type must be 0, 1, 2, 3 or 4"),
        (["-s", "1", "-n", "0.99"], "specified nu is infeasible"),
    ):
        r = run_cli(TRAIN, [*flags, data, tmp_path / "m"], 2, timeout=120)
        assert r.returncode != 0 and message in r.stderr, (flags, r.stderr[-2000:])
        assert not (tmp_path / "m").exists()
    zeros = tmp_path / "zeros"  # nu-SVC's margin r is 0: the linear kernel is 0 on every row
    zeros.write_text("1 1:0\n" * 3 + "-1 1:0\n" * 3)
    r = run_cli(TRAIN, ["-s", "1", "-t", "0", zeros, tmp_path / "m"], 2, timeout=120)
    assert r.returncode == 1, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert lines == [lines[0]] and "nu-SVC's margin r is 0 in class pair 1 of 1" in lines[0]
    assert not (tmp_path / "m").exists()


def test_predict_regression_under_mpiexec(shared_data, tmp_path):
    """psvm-predict on an epsilon-SVR model: the same file for every P, svm-predict's lines."""
    import numpy as np
    from libsvm.svmutil import svm_load_model, svm_predict, svm_read_problem

    data = write_head(shared_data / "cpusmall_scale.xz", tmp_path / "train", 800)
    model = tmp_path / "m.model"
    r = run_cli(TRAIN, ["-s", "3", "-q", "-c", "10", data, model], 2)
    assert r.returncode == 0, r.stderr[-2000:]
    outs = {}
    for n in (1, 3):
        out = tmp_path / f"out{n}"
        r = run_cli("psvm.cli.predict", [data, model, out], n)
        assert r.returncode == 0, r.stderr[-2000:]
        outs[n] = (out.read_bytes(), r.stdout)
    assert outs[3] == outs[1]
    y, x = svm_read_problem(data)
    ref, (_, mse, scc), _ = svm_predict(y, x, svm_load_model(str(model)), "-q")
    np.testing.assert_allclose(np.loadtxt(tmp_path / "out1"), ref, rtol=1e-12, atol=1e-12)
    assert outs[1][1].splitlines() == [
        f"Mean squared error = {mse:g} (regression)",
        f"Squared correlation coefficient = {scc:g} (regression)",
    ]


@pytest.mark.parametrize("svm_type", ["2", "3", "4"])
def test_cross_validation_of_every_type(shared_data, tmp_path, svm_type):
    """-v 5: LIBSVM's result lines for the type, the same for every P."""
    data = write_head(shared_data / "abalone_scale.xz", tmp_path / "train", 600)
    outs = []
    for n in (1, 2, 3):
        r = run_cli(TRAIN, ["-s", svm_type, "-q", "-v", "5", "-g", "0.5", data], n)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append(r.stdout)
    assert outs[1] == outs[0] and outs[2] == outs[0]
    lines = outs[0].splitlines()
    if svm_type == "2":
        assert len(lines) == 1 and lines[0].startswith("Cross Validation Accuracy = ")
    else:
        assert lines[0].startswith("Cross Validation Mean squared error = ")
        assert lines[1].startswith("Cross Validation Squared correlation coefficient = ")
        mse = float(lines[0].split("= ")[1])
        assert 5.0 < mse < 10.0, mse  # LIBSVM's -v 5 on these rows: 7.14 (-s 3), 7.13 (-s 4)


@pytest.mark.parametrize("svm_type", ["3", "4"])
def test_regression_probability_model(shared_data, tmp_path, svm_type):
    """-b 1 for the regressors: svm_svr_probability's Laplace sigma in probA, the same bits
    for every P, close to LIBSVM's (other folds), and svm-predict -b 1's line."""
    from libsvm.svmutil import svm_load_model, svm_read_problem, svm_train

    data = write_head(shared_data / "abalone_scale.xz", tmp_path / "train", 500)
    files = []
    for n in (1, 2, 3):
        model = tmp_path / f"m{n}"
        r = run_cli(TRAIN, ["-s", svm_type, "-b", "1", "-q", data, model], n)
        assert r.returncode == 0, r.stderr[-2000:]
        files.append(model.read_bytes())
    assert files[1] == files[0] and files[2] == files[0]
    # svm_train's order: the sigma line (svm_svr_probability runs first), then the model's
    r = run_cli(TRAIN, ["-s", svm_type, "-b", "1", data, tmp_path / "loud"], None)
    lines = r.stdout.splitlines()
    at = [k for k, ln in enumerate(lines) if ln.startswith("Prob. model for test data")]
    assert at and lines[at[0] + 2].startswith("optimization finished"), r.stdout
    # before it, svm-train's lines of the 5 folds (a user's trial: psvm printed none)
    assert sum(ln.startswith("optimization finished") for ln in lines[: at[0]]) == 5
    assert (tmp_path / "loud").read_bytes() == files[0]
    sigma = svm_load_model(str(tmp_path / "m1")).get_svr_probability()  # LIBSVM reads it
    y, x = svm_read_problem(data)
    ref = svm_train(y, x, f"-s {svm_type} -b 1 -q").get_svr_probability()
    assert abs(sigma - ref) <= 0.05 * ref, (sigma, ref)
    r = run_cli("psvm.cli.predict", ["-b", "1", data, tmp_path / "m1", tmp_path / "out"], 2)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[1] == (
        f"z: Laplace distribution e^(-|z|/sigma)/(2sigma),sigma={sigma:g}"
    )
    # fewer rows than folds: svm_cross_validation's leave-one-out and its warning (under -q
    # too), one fit a row, LIBSVM's sigma
    four = write_head(shared_data / "abalone_scale.xz", tmp_path / "four", 4)
    for n in (None, 2):
        r = run_cli(TRAIN, ["-s", svm_type, "-b", "1", four, tmp_path / "m4"], n)
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stderr.startswith("WARNING: # folds > # data. Will use # folds = # data")
        assert r.stdout.count("optimization finished") == 4 + 1
    y, x = svm_read_problem(four)
    ref = svm_train(y, x, f"-s {svm_type} -b 1 -q").get_svr_probability()
    assert svm_load_model(str(tmp_path / "m4")).get_svr_probability() == pytest.approx(ref)
