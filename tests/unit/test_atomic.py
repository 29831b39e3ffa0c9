"""psvm.io.atomic.write_atomic: whole new file or the old one, never a temporary left behind."""

import os
import stat
import subprocess

import numpy as np
import pytest

from psvm.io.atomic import remove_leftovers, writable_error, write_atomic


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


def test_a_missing_folder_is_named_by_the_path_given(tmp_path):
    """A user's trial: the error named the hidden temporary file, not the path written."""
    path = tmp_path / "nodir" / "m.model"
    with pytest.raises(FileNotFoundError) as e:
        with write_atomic(path):
            pass
    assert e.value.filename == str(path) and str(path) in str(e.value)
    assert ".tmp" not in str(e.value)


def test_a_link_keeps_pointing_at_its_rewritten_target(tmp_path):
    target, link = tmp_path / "target.model", tmp_path / "link.model"
    target.write_text("old\n")
    link.symlink_to(target.name)
    with write_atomic(link) as f:
        f.write("new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    dangling = tmp_path / "dangling"  # a link to no file yet: the file appears at its target
    dangling.symlink_to("made.model")
    with write_atomic(dangling) as f:
        f.write("made\n")
    assert dangling.is_symlink() and (tmp_path / "made.model").read_text() == "made\n"


def test_a_replaced_file_keeps_its_permissions(tmp_path):
    path = tmp_path / "private.model"
    path.write_text("old\n")
    path.chmod(0o600)
    with write_atomic(path) as f:
        f.write("new\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text() == "new\n"


def test_devices_and_pipes_are_written_in_place(tmp_path):
    """LIBSVM's commands write to /dev/null or a pipe; replacing them would turn them into
    plain files (as root, /dev/null itself)."""
    with write_atomic(os.devnull) as f:
        f.write("nothing\n")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert writable_error(os.devnull) is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    with write_atomic(fifo) as f:
        f.write("through the pipe\n")
    assert reader.communicate(timeout=30)[0] == b"through the pipe\n"
    assert stat.S_ISFIFO(fifo.stat().st_mode) and os.listdir(tmp_path) == ["fifo"]


def test_writable_error_names_what_cannot_be_written(tmp_path):
    assert "it is a folder" in str(writable_error(tmp_path))
    assert "does not exist" in str(writable_error(tmp_path / "no" / "m.model"))
    assert writable_error(tmp_path / "m.model") is None
    long = tmp_path / ("m" * 240)  # a name the folder takes, but not the temporary's
    assert "too long for psvm's temporary file" in str(writable_error(long))
    if os.path.isfile("/proc/version"):  # a file in a folder that takes no new one
        assert "its folder '/proc' takes no new file (No such file or directory)" in str(
            writable_error("/proc/version")
        )


def test_a_descriptor_s_path_is_written_through_it(tmp_path):
    """/dev/fd/N and /proc/self/fd/N name an open descriptor (/dev/stdout links to one):
    written after what it holds, its file neither replaced (a shell's redirection would go
    on into a deleted file) nor truncated."""
    log = tmp_path / "log"
    with open(log, "w") as f:
        f.write("before\n")
        f.flush()
        for path in (f"/dev/fd/{f.fileno()}", f"/proc/self/fd/{f.fileno()}"):
            assert writable_error(path) is None
            with write_atomic(path) as out:
                out.write("model\n")
        f.write("after\n")
    assert log.read_text() == "before\nmodel\nmodel\nafter\n"
    with open(log) as f:
        assert "open for reading only" in str(writable_error(f"/dev/fd/{f.fileno()}"))
    assert "Bad file descriptor" in str(writable_error("/dev/fd/987654"))
    assert os.listdir(tmp_path) == ["log"]


def test_two_outputs_of_one_file_are_refused(tmp_path):
    """``psvm-train --stats m data m``: the statistics would replace the model. A link, a
    hard link or a descriptor of the file is the file; /dev/null takes both."""
    from psvm.comm import Comm
    from psvm.io.atomic import OutputPathError, agree_writable

    comm = Comm()
    with pytest.raises(OutputPathError, match="it is the model file too"):  # no file yet
        agree_writable(comm, {"the model file": tmp_path / "m", "the --stats file": tmp_path / "m"})
    (tmp_path / "m").write_text("old\n")
    (tmp_path / "link").symlink_to("m")
    os.link(tmp_path / "m", tmp_path / "hard")
    with open(tmp_path / "m", "a") as f:
        for other in ("m", "link", "hard", f"/dev/fd/{f.fileno()}"):
            with pytest.raises(OutputPathError, match="it is the model file too"):
                outputs = {"the model file": tmp_path / "m", "the --stats file": tmp_path / other}
                agree_writable(comm, outputs)
    agree_writable(comm, {"the model file": tmp_path / "m", "the --stats file": tmp_path / "s"})
    agree_writable(comm, {"the model file": os.devnull, "the --stats file": os.devnull})


def test_leftovers_of_a_killed_write_are_removed(tmp_path):
    """A user's trial: SIGKILL during checkpoint writes left '.ck.npz.<hex>.tmp' files that
    no later run removed. A checkpoint removes its own before its first write; nothing else."""
    path = tmp_path / "ck.npz"
    mine = [tmp_path / ".ck.npz.0123456789ab.tmp", tmp_path / ".ck.npz.ba9876543210.tmp"]
    others = [tmp_path / n for n in (".ck.npz.xyz.tmp", ".other.0123456789ab.tmp", "ck.npz")]
    for p in mine + others:
        p.write_bytes(b"x")
    remove_leftovers(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in others)
    remove_leftovers(tmp_path / "missing" / "ck.npz")  # no folder: nothing to do
