import os
from pathlib import Path

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.io import append_jsonl, atomic_dir, atomic_write_text, file_lock, read_jsonl
from polymnesia.registry import Registry


def test_registry_lookup_and_suggestion():
    reg: Registry[int] = Registry("widget")
    reg.add("alpha", 1, "first")
    reg.add("beta", 2)
    assert reg.get("alpha") == 1 and reg.names() == ["alpha", "beta"]
    with pytest.raises(
        PolymnesiaError,
        match=r"unknown widget 'alpah' \(did you mean 'alpha'\?\); accepted: alpha, beta",
    ):
        reg.get("alpah")
    with pytest.raises(ValueError):
        reg.add("alpha", 3)


def test_atomic_write_leaves_no_temp_on_failure(tmp_path: Path):
    target = tmp_path / "x.txt"
    atomic_write_text(target, "one")
    with pytest.raises(RuntimeError), atomic_dir(tmp_path / "d") as d:
        (d / "f").write_text("partial")
        raise RuntimeError("crash")
    assert target.read_text() == "one"
    assert sorted(os.listdir(tmp_path)) == ["x.txt"]


def test_read_jsonl_skips_torn_last_line(tmp_path: Path):
    p = tmp_path / "m.jsonl"
    append_jsonl(p, {"step": 1})
    with open(p, "a") as f:
        f.write('{"step": 2')  # a crash mid-write
    assert read_jsonl(p) == [{"step": 1}]


def test_file_lock_refuses_second_holder(tmp_path: Path):
    lock = tmp_path / ".lock"
    with file_lock(lock, "run folder X"):
        import subprocess
        import sys

        code = (
            "import sys\nfrom polymnesia.io import file_lock\n"
            f"try:\n    file_lock({str(lock)!r}, 'run folder X').__enter__()\nexcept Exception as "
            "e:\n    print(e)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
        assert "in use by another polymnesia process" in out


def test_atomic_write_uses_the_usual_file_mode(tmp_path: Path):
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "r.md", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "r.md").stat().st_mode & 0o777 == 0o644
