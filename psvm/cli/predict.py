"""psvm-predict: LIBSVM's svm-predict, each rank predicting its shard of the test file.

mpiexec -n 2 psvm-predict a9a.t a9a.model a9a.t.predict
"""

from __future__ import annotations

import sys

from psvm._params import REGRESSORS
from psvm.cli._common import (
    LAPLACE,
    HelpRequested,
    UsageError,
    last_output,
    late_options,
    number,
    run_main,
    unknown_option,
)

USAGE = (
    "Usage: psvm-predict [options] test_file model_file output_file\noptions:\n"
    "-b probability_estimates: whether to predict probability estimates, 0 or 1 (default 0);"
    " models trained with -b 1\n"
    "-q : quiet mode (no outputs)\n"
    "--strict-features : refuse test features the model has not seen (LIBSVM predicts with them)"
)


SWITCHES = ("-q", "--strict-features")
HELP = ("-h", "--help")
NO_VALUE = frozenset(SWITCHES + HELP)  # the flags without a value (comparing the ranks' argv)


def parse_args(argv: list[str]) -> dict:
    """svm-predict's options, then its three files; ``-h`` or ``--help`` among the options or
    as the last word (svm-predict would write its output to ``-h``) asks for the usage."""
    opts: dict = {"quiet": False, "strict": False, "probability": 0}
    if argv[-1:] and argv[-1] in HELP:
        raise HelpRequested()
    k = 0
    while k < len(argv) and argv[k].startswith("-") and len(argv[k]) > 1:
        if argv[k] in SWITCHES:
            opts["quiet" if argv[k] == "-q" else "strict"] = True
            k += 1
        elif argv[k] == "-b":
            if k + 1 >= len(argv):
                raise UsageError("option -b needs a value")
            opts["probability"] = number("-b", argv[k + 1], int)
            if opts["probability"] not in (0, 1):
                raise UsageError(f"-b {argv[k + 1]}: probability_estimates must be 0 or 1")
            k += 2
        elif argv[k] in HELP:
            raise HelpRequested()
        else:
            raise unknown_option(argv[k], ("-b", *SWITCHES), "psvm-predict")
    if len(argv) - k != 3:
        raise UsageError("expected test_file model_file output_file" + late_options(argv[k:]))
    opts["test"], opts["model"], opts["output"] = argv[k:]
    return opts


def _body(argv: list[str]) -> int:
    """Each rank predicts its lines of the test file; rank 0 writes them in the file's order
    and prints svm-predict's summary."""
    from psvm.comm import world
    from psvm.io.atomic import agree_writable, write_atomic
    from psvm.threads import apply_threads

    opts = parse_args(argv)
    comm = world()
    apply_threads(None, comm)  # the node's cores shared by its ranks, as psvm-train
    inputs = {"the test file": opts["test"], "the model file": opts["model"]}
    agree_writable(comm, {"the output file": opts["output"]}, inputs)
    model = _read_model(comm, opts)
    model, shard = _test_rows(comm, opts, model)
    svm_type = getattr(model, "svm_type", None)  # (None: LIBLINEAR's)
    regression = svm_type in REGRESSORS
    if opts["probability"] and regression:  # the values as without -b, after LIBSVM's line
        if comm.rank == 0 and not opts["quiet"]:
            print(f"{LAPLACE}={float(model.meta['probA'][0]):g}")
    probability = opts["probability"] and not regression
    text, pred, truth = _predictions(comm, model, shard, probability, svm_type)
    if comm.rank == 0:
        with last_output(opts["output"]), write_atomic(opts["output"]) as f:
            f.write(text)
        if not opts["quiet"]:
            print(result_lines(pred, truth, regression))
    return 0


def _read_model(comm, opts: dict):
    """The model file, LIBLINEAR's format (psvm-train --solver sgd) or LIBSVM's, its errors
    agreed; svm-predict's line on a probability model read without -b."""
    from psvm.io.linear_model_file import read_any_model
    from psvm.model import NO_PROBABILITY

    model, error = None, None
    try:
        model = read_any_model(opts["model"])
    except (OSError, ValueError) as e:
        error = e
    svm_type = getattr(model, "svm_type", None)  # (None: LIBLINEAR's)
    if error is None and opts["probability"] and not model.has_probability:
        error = ValueError(  # svm-predict's words, or LIBLINEAR's predict's
            NO_PROBABILITY
            if svm_type
            else "probability output is only supported for logistic regression"
        )
    comm.agree(error)
    if comm.rank == 0 and not (opts["probability"] or opts["quiet"]) and svm_type:
        if model.has_probability:  # as svm-predict (LIBLINEAR's predict says nothing)
            print("Model supports probability estimates, but disabled in prediction.")
    return model


def _test_rows(comm, opts: dict, model) -> tuple:
    """(model, shard): this rank's lines of the test file, and the model, both 0-based when
    one of them holds feature index 0."""
    from psvm.io.shard import load_shard

    # by default, as LIBSVM: a feature the model never saw adds to an RBF row's norm
    width = model.n_features if opts["strict"] else None
    gram, need = None, 0
    kernel = getattr(model, "kernel", None)  # (LIBLINEAR's models have none, nor index 0)
    if kernel == "precomputed":  # rows 0:? 1:K(x,x1) ... (-t 4)
        gram, width = "test", None
        need = int(model.serials().max(initial=0))
    elif kernel is not None and width is not None:
        width = model.max_index
    # each rank predicts the lines of its byte range; an empty file predicts nothing, as svm-predict
    shard = load_shard(
        comm,
        opts["test"],
        n_features=width,
        width_name="the model's, --strict-features" if gram is None else None,
        min_classes=0,
        balance=False,
        allow_empty=True,
        gram=gram,
        gram_columns=need,
        allow_zero=kernel not in (None, "precomputed"),  # as svm-predict reads index 0
    )
    if kernel is not None and model.index_base != shard.index_base:  # one holds index 0
        if opts["strict"] and shard.index_base == 0:  # (the same on every rank)
            from psvm.io.libsvm_format import LibsvmFormatError

            reason = "holds feature index 0, which the model has not seen (--strict-features)"
            comm.agree(LibsvmFormatError(opts["test"], None, reason))
        model, shard = model.zero_based(), shard.zero_based()
    return model, shard


def _predictions(comm, model, shard, probability: bool, svm_type: str | None) -> tuple:
    """(the output file's text, the predictions, the true labels or values): on rank 0 in the
    file's order, (None, None, None) elsewhere. ``probability``: svm-predict -b 1's lines."""
    import numpy as np

    if probability:
        pred, prob = model.predict_proba(shard.X)
        prob = comm.gatherv(prob.ravel())
    else:
        pred = np.asarray(model.predict(shard.X) if shard.n_local else [], dtype=np.float64)
    pred, truth = comm.gatherv(np.asarray(pred, np.float64)), comm.gatherv(shard.y)  # file order
    if comm.rank != 0:
        return None, None, None
    if probability:
        head = "labels " + " ".join(f"{c:d}" for c in model.classes.tolist()) + "\n"
        n_cols = model.classes.size
        if svm_type == "one_class":  # svm-predict 3.3x: P(normal), P(outlier)
            head, n_cols = "label normal outlier\n", 2
        return head + _proba_lines(pred, prob.reshape(pred.size, n_cols)), pred, truth
    labels, which = np.unique(pred, return_inverse=True)
    text = "".join(np.array([f"{v:.17g}\n" for v in labels], dtype=object)[which])
    return text, pred, truth


def _proba_lines(pred, prob) -> str:
    """svm-predict -b 1's rows: the label, then each class's probability, all ``%g``."""
    return "".join(
        " ".join([f"{p:g}", *(f"{v:g}" for v in row)]) + "\n"
        for p, row in zip(pred.tolist(), prob.tolist(), strict=True)
    )


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
    return run_main("psvm-predict", USAGE, _body, argv, (frozenset(), NO_VALUE))


if __name__ == "__main__":
    sys.exit(main())
