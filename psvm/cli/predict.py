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

    opts = parse_args(argv)
    comm = world()
    agree_writable(comm, {"the output file": opts["output"]})
    model, error = None, None
    try:  # LIBLINEAR's format (psvm-train --solver sgd) or LIBSVM's
        model = read_any_model(opts["model"])
    except (OSError, ValueError) as e:
        error = e
    comm.agree(error)
    # by default, as LIBSVM: a feature the model never saw adds to an RBF row's norm
    width = model.n_features if opts["strict"] else None
    shard = load_shard(comm, opts["test"], n_features=width, min_classes=0)
    pred = model.predict(shard.X) if shard.X.shape[0] else np.empty(0)
    pred = comm.allgatherv(np.asarray(pred, dtype=np.float64))
    truth = comm.allgatherv(shard.y)
    if comm.rank == 0:
        with write_atomic(opts["output"]) as f:
            f.writelines(f"{p:.17g}\n" for p in pred)
        correct = int(np.sum(pred == truth))
        total = truth.size
        if not opts["quiet"]:
            acc = 100.0 * correct / total if total else 0.0
            print(f"Accuracy = {acc:g}% ({correct}/{total}) (classification)")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_main("psvm-predict", USAGE, _body, argv)


if __name__ == "__main__":
    sys.exit(main())
