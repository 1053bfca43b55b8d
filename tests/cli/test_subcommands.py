"""The command line is thin: one module per subcommand, the checks before a run in the library,
and one name per concept in ``polymnesia ls`` (old spellings accepted with a note)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from polymnesia.cli import main as cli
from polymnesia.cli.ls import RENAMED
from polymnesia.errors import ConfigError
from polymnesia.experiments.preflight import check_config

CLI = Path(cli.__file__).parent
ROOT = Path(__file__).resolve().parents[2]


def _subcommands() -> list[str]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices or ())


def test_each_subcommand_has_its_own_module() -> None:
    names = _subcommands()
    expected = [
        "cache",
        "compare",
        "data",
        "env",
        "export",
        "init",
        "ls",
        "plan",
        "report",
        "run",
        "status",
        "sweep",
        "validate",
    ]
    assert names == expected
    for name in names:
        assert (CLI / f"{name}.py").is_file(), name


def test_main_only_assembles_and_reports_errors() -> None:
    """main.py imports no library module inside a function but the runtime's shutdown (it had
    26 such imports and the run preflight before the subcommands got their modules)."""
    tree = ast.parse((CLI / "main.py").read_text(encoding="utf-8"))
    deferred = [
        node.module
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef)
        for node in ast.walk(fn)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("polymnesia")
    ]
    assert deferred == ["polymnesia.runtime"]
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert not defined & {"preflight", "build_specs", "check_settings", "cmd_run", "cmd_ls"}


def test_ls_uses_one_name_per_concept(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ls"]) == 0
    out = capsys.readouterr().out
    headers = {line[:-1] for line in out.splitlines() if line and not line.startswith(" ")}
    assert set(RENAMED.values()) <= headers
    assert not set(RENAMED) & headers  # the old spellings are not categories any more
    stages = out.split("stages:\n")[1].split("\n\n")[0].splitlines()
    row = next(line for line in stages if line.split()[0] == "prepare_data")
    assert row.split()[1] == "data"  # each stage's category, what `run --only` selects


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED.items()))
def test_ls_old_spelling_is_accepted_with_a_note(
    old: str, new: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["ls", old]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{new}:\n")
    assert captured.err == f"polymnesia: note: '{old}' is now called '{new}'\n"


def test_validate_and_the_library_check_share_one_function(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = str(ROOT / "configs" / "quickstart.yaml")
    cfg, specs = check_config(config)
    assert cli.main(["validate", config]) == 0
    assert capsys.readouterr().out == f"ok  {config}  ({cfg.experiment}, {len(specs)} stages)\n"


def test_the_library_check_refuses_in_one_line() -> None:
    config = str(ROOT / "configs" / "active_forgetting_smoke.yaml")
    with pytest.raises(ConfigError) as e:
        check_config(config, ["instruct.fields.instrucion=q"])
    assert str(e.value) == (
        f"config {config}: instruct.fields: unknown role 'instrucion'; accepted: instruction, "
        "input, output (each maps to a column of the dataset)"
    )


def test_help_answers_without_loading_torch() -> None:
    """``polymnesia --help`` and argument errors load no library (torch took ~5 s of it)."""
    code = (
        "import sys\n"
        "from polymnesia.cli.main import main\n"
        "for argv in (['--help'], ['run']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines()[-1] == "False"
