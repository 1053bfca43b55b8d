"""Shipped configs by name (``polymnesia run quickstart``) and ``polymnesia init DIR``."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.errors import ConfigError
from polymnesia.shipped import resolve, shipped_names

ROOT = Path(__file__).resolve().parents[2]


def test_a_shipped_name_resolves_to_its_file_and_a_path_stays_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no configs/ folder here: the names are the package's
    assert Path(resolve("quickstart")) == ROOT / "configs" / "quickstart.yaml"
    assert Path(resolve("gpu/lifelong")) == ROOT / "configs" / "gpu" / "lifelong.yaml"
    assert resolve("mine.yaml") == "mine.yaml"  # a path: load_yaml says it is missing
    (tmp_path / "quickstart").write_text("experiment: x\n")
    assert resolve("quickstart") == "quickstart"  # a file of that name wins
    with pytest.raises(ConfigError) as e:
        resolve("quikstart")
    assert "\n" not in str(e.value) and "shipped config: active_forgetting" in str(e.value)
    assert len(shipped_names()) == len(list((ROOT / "configs").rglob("*.yaml")))


def test_init_copies_every_shipped_config_and_refuses_a_full_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "mine"
    assert main(["init", str(dest)]) == 0
    copied = sorted(p.relative_to(dest) for p in dest.rglob("*.yaml"))
    assert copied == sorted(
        p.relative_to(ROOT / "configs") for p in (ROOT / "configs").rglob("*.yaml")
    )
    assert (dest / "quickstart.yaml").read_bytes() == (
        ROOT / "configs/quickstart.yaml"
    ).read_bytes()
    assert main(["init", str(dest)]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err


def test_validate_takes_shipped_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "quickstart"]) == 0
    assert "configs/quickstart.yaml" in capsys.readouterr().out
