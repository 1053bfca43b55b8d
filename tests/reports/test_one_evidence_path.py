"""One evidence path: report code reads a run folder's records and items, never a stage folder.

A report is rebuilt from the run folder alone (``polymnesia report RUN_DIR`` on a copy whose
cache was deleted), so no report module may build a path under ``RUN_DIR/stages/``, read a
cache entry's marker or follow ``run.json``'s ``entry`` paths into the cache. This walks the
syntax tree of every report module (issue 28, "One evidence path").
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "polymnesia"
#: every module that makes a report: reports/, each protocol's report, claims, figures and
#: evidence, the shared report pieces
REPORT_CODE = sorted(
    {
        *SRC.glob("reports/*.py"),
        *(
            p
            for name in ("report", "claims", "figures", "evidence", "abilities", "results")
            for p in SRC.glob(f"experiments/*/{name}.py")
        ),
        SRC / "experiments" / "reporting.py",
    }
)
#: modules that know where a stage keeps its files in the cache
CACHE_MODULES = ("polymnesia.pipeline.integrity", "polymnesia.pipeline.runner")


def _stage_path(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and (
        node.value == "stages" or (isinstance(node.value, str) and node.value.startswith("stages/"))
    )


def violations(source: str) -> list[str]:
    """Lines of ``source`` that reach into a stage folder or the cache."""
    out = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if _stage_path(node.left) or _stage_path(node.right):
                out.append(f"line {line}: a path under the run's stages/ folder")
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name in {"Path", "PurePath", "joinpath", "glob", "rglob"} and any(
                _stage_path(a)
                or (
                    isinstance(a, ast.Constant)
                    and isinstance(a.value, str)
                    and "stages/" in a.value
                )
                for a in node.args
            ):
                out.append(f"line {line}: {name}() of a path under stages/")
            if name == "get" and node.args and _is(node.args[0], "entry"):
                out.append(f"line {line}: run.json's cache entry path")
        elif isinstance(node, ast.Subscript) and _is(node.slice, "entry"):
            out.append(f"line {line}: run.json's cache entry path")
        elif isinstance(node, ast.ImportFrom) and node.module in CACHE_MODULES:
            out.append(f"line {line}: imports {node.module} (cache entries)")
        elif isinstance(node, ast.Import):
            out += [f"line {line}: imports {a.name}" for a in node.names if a.name in CACHE_MODULES]
    return out


def _is(node: ast.AST, value: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == value


def test_the_report_code_is_found() -> None:
    names = {str(p.relative_to(SRC)) for p in REPORT_CODE}
    assert {
        "reports/frame.py",
        "experiments/two_phase/abilities.py",
        "experiments/lifelong/evidence.py",
        "experiments/lf_mlf/report.py",
        "experiments/reporting.py",
    } <= names
    assert len(names) >= 25


@pytest.mark.parametrize("path", REPORT_CODE, ids=lambda p: str(p.relative_to(SRC)))
def test_no_report_code_opens_a_path_under_a_stage_folder(path: Path) -> None:
    assert violations(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "bad",
    [
        'x = run_dir / "stages" / name / "items.jsonl"',
        'x = run_dir / "stages/drift/tsne.json"',
        'for d in sorted(run_dir.glob("stages/set_*")): pass',
        'entry = Path(rec["entry"])',
        'entry = rec.get("entry")',
        "from polymnesia.pipeline.integrity import read_marker",
        "import polymnesia.pipeline.runner",
    ],
)
def test_the_check_catches_each_way_into_a_stage_folder(bad: str) -> None:
    assert violations(bad)


def test_records_and_items_pass() -> None:
    ok = (
        'scores = read_scores(run_dir / "results" / "scores.jsonl")\n'
        "items = run_items(run_dir)\n"
        'stages = json.loads(text).get("stages", {})\n'  # run.json's stage names and kinds
    )
    assert violations(ok) == []
