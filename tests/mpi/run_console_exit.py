"""A console run's end under mpiexec (tests/test_cli.py): each rank prints its line unflushed,
takes part in a collective, and leaves through run_main's exit with ``argv``'s code."""

from psvm.cli._common import run_main


def body(argv: list[str]) -> int:
    from psvm.comm import world

    comm = world()
    print(f"rank {comm.rank} of {int(comm.sum_(1))};", end="")  # one write when flushed
    return int(argv[0])


run_main("prog", "usage", body, None)
print("not reached")
