"""issue 30, configuration: what a bpfmem.toml or the command line may hold that must not
crash bpfmem or turn its gate: sizes past 2^64 and exponents of millions of digits, releases
written as TOML floats, a config planted by another user on the walk up, a sparse
pyproject.toml. Each ends in one line (or a warning and the file passed over)."""

from __future__ import annotations

import os
import pwd

import pytest

from bpfmem.cli import main
from bpfmem.config import find_config, load_config, untrusted_reason

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "src", "bpfmem", "examples",
                       "cni_datapath.bpf.o")
NOBODY = pwd.getpwnam("nobody").pw_uid


def _one_line(capsys, argv, code):
    assert main(argv) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.mark.parametrize("value", ["1e400", "1e10000000", "99999999999999999999Ei"])
def test_sizes_past_2_64_in_the_config_and_on_the_command_line(capsys, tmp_path, monkeypatch,
                                                               value):
    (tmp_path / "bpfmem.toml").write_text(f'limit = "{value}"\n')
    monkeypatch.chdir(tmp_path)
    line = _one_line(capsys, ["check", EXAMPLE], 1)
    assert line.endswith(f"bpfmem.toml: limit: '{value}' is more than a size can be (16Ei)")
    (tmp_path / "bpfmem.toml").write_text("limit = 1e400\n")        # a TOML float: inf
    assert _one_line(capsys, ["check", EXAMPLE], 1).endswith("not inf")
    (tmp_path / "bpfmem.toml").unlink()
    for flag in ("--limit", "--max-binary-size"):
        line = _one_line(capsys, ["check", EXAMPLE, flag, value], 2)
        assert line.endswith(f"{flag}: '{value}' is more than a size can be (16Ei)")


def test_releases_written_as_floats_are_refused(tmp_path):
    """`kernels = [6.1, 6.10]` read as 6.1 twice and passed."""
    p = tmp_path / "bpfmem.toml"
    p.write_text('limit = "1Gi"\nkernels = [6.1, 6.10]\n')
    with pytest.raises(Exception) as e:
        load_config(p)
    assert "kernels[0]: 6.1 is a number; write releases as strings" in str(e.value)
    p.write_text('limit = "1Gi"\nkernels = "6"\n')
    assert load_config(p).kernels == ["6"]
    p.write_text('limit = "1Gi"\nkernels = 6\n')
    with pytest.raises(Exception, match="kernels\\[0\\]: 6 is a number"):
        load_config(p)
    p.write_text('limit = "1Gi"\nkernels = ["6.1", "6.10"]\n')
    assert load_config(p).kernels == ["6.1", "6.10"]


def test_another_users_config_in_a_sticky_world_writable_parent_is_passed_over(
        capsys, tmp_path, monkeypatch):
    """A nobody-owned bpfmem.toml with `limit = "1Ei"` in a sticky world-writable parent
    turned root's gate into PASS; now it is passed over with a warning (and check says it
    has no limit)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    sub = shared / "project"
    sub.mkdir()
    planted = shared / "bpfmem.toml"
    planted.write_text('limit = "1Ei"\n')
    os.chown(planted, NOBODY, -1)
    monkeypatch.chdir(sub)
    assert untrusted_reason(str(planted)).startswith(f"owned by uid {NOBODY}")
    assert find_config() is None
    assert main(["check", EXAMPLE]) == 2
    err = capsys.readouterr().err
    assert f"bpfmem: warning: {planted} not read: owned by uid {NOBODY}" in err
    assert "check needs --limit" in err
    # root's own file in the sticky directory (only its owner may replace it) is read
    os.chown(planted, 0, -1)
    assert find_config() == planted and load_config().limit == 1 << 60


def test_a_config_in_a_directory_others_may_write_is_passed_over(capsys, tmp_path, monkeypatch):
    d = tmp_path / "open"
    d.mkdir()
    (d / "bpfmem.toml").write_text('limit = "1Ei"\n')
    os.chmod(d, 0o777)                     # not sticky: anyone may replace the file
    monkeypatch.chdir(d)
    assert find_config() is None
    assert "its directory is writable by others (mode 777, not sticky)" in capsys.readouterr().err
    os.chmod(d, 0o775)
    assert find_config() is None
    assert "writable by its group" in capsys.readouterr().err
    os.chmod(d, 0o755)
    os.chmod(d / "bpfmem.toml", 0o666)
    assert find_config() is None
    assert "writable by group or others (mode 666)" in capsys.readouterr().err
    os.chmod(d / "bpfmem.toml", 0o644)
    assert find_config() == d / "bpfmem.toml"
    # another user's pyproject.toml with [tool.bpfmem] is passed over too
    (d / "bpfmem.toml").unlink()
    (d / "pyproject.toml").write_text('[tool.bpfmem]\nlimit = "1Ei"\n')
    os.chown(d / "pyproject.toml", NOBODY, -1)
    assert find_config() is None
    assert "pyproject.toml not read: owned by uid" in capsys.readouterr().err


def test_a_sparse_pyproject_on_the_way_up_is_not_read(tmp_path, monkeypatch):
    """Every pyproject.toml on the way up was read whole (a sparse 3 GiB one: 3 GiB RSS):
    through the input door it is refused at its size (1 MiB), before a byte is read."""
    with open(tmp_path / "pyproject.toml", "wb") as f:
        f.truncate(3 << 30)
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    from bpfmem import inputs

    def no_read(*a):
        raise AssertionError("read")
    monkeypatch.setattr(inputs, "_read_fd", no_read)
    assert find_config() is None
