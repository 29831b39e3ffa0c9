"""psvm-predict: LIBSVM's svm-predict, each rank predicting its shard of the test file.

mpiexec -n 2 psvm-predict a9a.t a9a.model a9a.t.predict
"""

from __future__ import annotations

import sys

from psvm.cli._common import HelpRequested, UsageError, number, run_main, unknown_option

USAGE = (
    "Usage: psvm-predict [options] test_file model_file output_file\noptions:\n"
    "-b probability_estimates: only 0 is supported\n"
    "-q : quiet mode (no outputs)\n"
    "--strict-features : refuse test features the model has not seen (LIBSVM predicts with them)"
)


def parse_args(argv: list[str]) -> dict:
    opts: dict = {"quiet": False, "strict": False}
    k = 0
    while k < len(argv) and argv[k].startswith("-") and len(argv[k]) > 1:
        if argv[k] in ("-q", "--strict-features"):
            opts["quiet" if argv[k] == "-q" else "strict"] = True
            k += 1
        elif argv[k] == "-b":
            if k + 1 >= len(argv):
                raise UsageError("option -b needs a value")
            if number("-b", argv[k + 1], int) != 0:
                raise UsageError("-b 1: probability estimates are not supported")
            k += 2
        elif argv[k] in ("-h", "--help"):
            raise HelpRequested()
        else:
            raise unknown_option(argv[k], ("-b", "-q", "--strict-features"), "psvm-predict")
    if len(argv) - k != 3:
        raise UsageError("expected test_file model_file output_file")
    opts["test"], opts["model"], opts["output"] = argv[k:]
    return opts


def _body(argv: list[str]) -> int:
    import numpy as np

    from psvm.comm import world
    from psvm.io.atomic import agree_writable, write_atomic
    from psvm.io.linear_model_file import read_any_model
    from psvm.io.shard import load_shard
    from psvm.threads import apply_threads

    opts = parse_args(argv)
    comm = world()
    apply_threads(None, comm)  # the node's cores shared by its ranks, as psvm-train
    agree_writable(comm, {"the output file": opts["output"]})
    model, error = None, None
    try:  # LIBLINEAR's format (psvm-train --solver sgd) or LIBSVM's
        model = read_any_model(opts["model"])
    except (OSError, ValueError) as e:
        error = e
    comm.agree(error)
    # by default, as LIBSVM: a feature the model never saw adds to an RBF row's norm
    width = model.n_features if opts["strict"] else None
    # each rank predicts the lines of its byte range; an empty file predicts nothing, as svm-predict
    shard = load_shard(
        comm, opts["test"], n_features=width, min_classes=0, balance=False, allow_empty=True
    )
    pred = np.asarray(model.predict(shard.X) if shard.n_local else [], dtype=np.float64)
    pred, truth = comm.gatherv(pred), comm.gatherv(shard.y)  # in rank order: the file's order
    if comm.rank == 0:
        labels, which = np.unique(pred, return_inverse=True)
        text = np.array([f"{v:.17g}\n" for v in labels], dtype=object)
        with write_atomic(opts["output"]) as f:
            f.write("".join(text[which]))
        if not opts["quiet"]:
            regression = getattr(model, "svm_type", "c_svc") in ("epsilon_svr", "nu_svr")
            print(result_lines(pred, truth, regression))
    return 0


def result_lines(pred, truth, regression: bool) -> str:
    """svm-predict's summary: accuracy, or for regression the mean squared error and the
    squared correlation coefficient (its formulas)."""
    import numpy as np

    total = truth.size
    if not regression:
        correct = int(np.sum(pred == truth))
        acc = 100.0 * correct / total if total else float("nan")  # svm-predict: -nan
        return f"Accuracy = {acc:g}% ({correct}/{total}) (classification)"
    n = float(total)
    sp, st = pred.sum(), truth.sum()
    spp, stt, spt = pred @ pred, truth @ truth, pred @ truth
    with np.errstate(divide="ignore", invalid="ignore"):
        mse = np.sum((pred - truth) ** 2) / n
        r2 = (n * spt - sp * st) ** 2 / ((n * spp - sp * sp) * (n * stt - st * st))
    return (
        f"Mean squared error = {mse:g} (regression)\n"
        f"Squared correlation coefficient = {r2:g} (regression)"
    )


def main(argv: list[str] | None = None) -> int:
    return run_main("psvm-predict", USAGE, _body, argv)


if __name__ == "__main__":
    sys.exit(main())
