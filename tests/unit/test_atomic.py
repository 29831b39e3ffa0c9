"""psvm.io.atomic.write_atomic: whole new file or the old one, never a temporary left behind."""

import os

import numpy as np
import pytest

from psvm.io.atomic import write_atomic


def test_text_and_binary_writes(tmp_path):
    text = tmp_path / "a.txt"
    with write_atomic(text, encoding="ascii", newline="\n") as f:
        f.write("one\ntwo\n")
    assert text.read_bytes() == b"one\ntwo\n"
    arrays = tmp_path / "state.npz"
    with write_atomic(arrays, "wb") as f:
        np.savez(f, alpha=np.arange(3.0), G=np.ones(2))
    with np.load(arrays) as z:
        np.testing.assert_array_equal(z["alpha"], [0.0, 1.0, 2.0])
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "state.npz"]


def test_failure_keeps_the_old_file(tmp_path):
    path = tmp_path / "m.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="disk on fire"):
        with write_atomic(path, "wb") as f:
            f.write(b"partial")
            raise RuntimeError("disk on fire")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["m.bin"]


def test_bad_mode():
    with pytest.raises(ValueError, match="mode"):
        with write_atomic("x", "a"):
            pass
