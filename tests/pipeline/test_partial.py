"""A run that lost stages for good (:mod:`polymnesia.pipeline.partial`): which stages its
report is built from (an arm whole or not at all), the record in ``run.json`` and the
report's banner lines."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from polymnesia.pipeline.partial import (
    banner_lines,
    partial_plan,
    read_missing,
    write_missing,
)
from polymnesia.pipeline.run_dir import forget_stages, link_stage
from polymnesia.reports.render import Report

#: name -> (stage kind, arm label or None, the stages it takes inputs from)
GRAPH: dict[str, tuple[str, str | None, list[str]]] = {
    "data": ("prepare_data", None, []),
    "pretrain": ("pretrain", None, ["data"]),
    "eval_base": ("evaluate_lm", "Baseline", ["pretrain"]),
    "adapt": ("adapt_vocabulary", "AFA", ["pretrain"]),
    "eval_afa": ("evaluate_lm", "AFA", ["adapt", "data"]),
    "harness_afa": ("evaluate_lm", "AFA", ["adapt"]),
    "relearn": ("relearn_new_tokens", "relearned", ["adapt"]),
    "eval_relearned": ("evaluate_lm", "relearned", ["relearn"]),
}


def _planned(graph: dict[str, tuple[str, str | None, list[str]]] = GRAPH) -> list[Any]:
    def params(kind: str, label: str | None) -> Any:
        return SimpleNamespace(label=label) if label else SimpleNamespace()

    return [
        SimpleNamespace(
            spec=SimpleNamespace(
                name=n,
                kind=kind,
                params=params(kind, label),
                inputs={f"in{i}": u for i, u in enumerate(ups)},
            )
        )
        for n, (kind, label, ups) in graph.items()
    ]


LOG = Path("/runs/r/logs/eval_afa.log")


def test_an_arm_that_lost_a_stage_is_left_out_whole() -> None:
    # eval_afa failed; harness_afa finished, but an arm is reported whole or not at all
    graph = {n: v for n, v in GRAPH.items() if "relearn" not in n}
    part = partial_plan(_planned(graph), {"eval_afa": LOG}, set(graph) - {"eval_afa"})
    assert part.arms == ["AFA"] and part.failed == {"eval_afa": str(LOG)}
    assert part.kept == ["data", "pretrain", "eval_base"]
    assert part.stages["adapt"] == {
        "state": "left out",
        "arm": "AFA",
        "failed": ["eval_afa"],
        "because": "arm AFA is missing",
    }
    assert part.stages["harness_afa"]["state"] == "left out"


def test_a_stage_that_needs_a_left_out_one_takes_its_arm_out_too() -> None:
    # relearn (arm "relearned") needs adapt, which is left out with arm AFA: relearned goes
    # too, so no arm's numbers rest on a stage that is not in the run folder
    part = partial_plan(_planned(), {"harness_afa": LOG}, set(GRAPH) - {"harness_afa"})
    assert part.arms == ["AFA", "relearned"]
    assert part.stages["relearn"]["because"] == "it needs adapt"
    assert part.stages["eval_relearned"]["because"] == "arm relearned is missing"
    assert part.kept == ["data", "pretrain", "eval_base"]


def test_a_failed_shared_stage_holds_back_every_arm() -> None:
    part = partial_plan(_planned(), {"pretrain": LOG}, {"data"})
    assert part.kept == ["data"] and part.arms == ["Baseline", "AFA", "relearned"]
    assert {s["state"] for n, s in part.stages.items() if n != "pretrain"} == {"held back"}
    assert all(s["failed"] == ["pretrain"] for s in part.stages.values())


def test_a_failed_stage_of_no_arm_leaves_the_arms_alone() -> None:
    graph = {**GRAPH, "drift": ("representation_drift", None, ["adapt", "pretrain"])}
    part = partial_plan(_planned(graph), {"drift": LOG}, set(graph) - {"drift"})
    assert part.arms == [] and part.kept == list(GRAPH)
    lines = banner_lines(part.record())
    assert lines[0].startswith("Incomplete run: 1 of 9 stages are missing, so arms (none)")
    assert lines[1] == (
        f"Missing stages of no one arm: drift (stage drift failed (log: {LOG})); what they "
        "build is left out."
    )


def test_the_banner_names_each_missing_arm_its_failed_stage_and_log() -> None:
    part = partial_plan(_planned(), {"adapt": LOG}, set(GRAPH) - {"adapt", "eval_afa"})
    lines = banner_lines(part.record())
    assert "arms AFA, relearned are left out of this report" in lines[0]
    assert "a claim that compares a missing arm is not testable in this run" in lines[0]
    assert lines[1] == (
        f"Arm AFA is missing: stage adapt failed (log: {LOG}); its stages not run or left "
        "out: eval_afa, harness_afa."
    )
    assert lines[2].startswith("Arm relearned is missing: stage adapt failed (log: ")


def test_the_record_is_kept_in_run_json_and_removed_when_the_run_is_whole(
    tmp_path: Path,
) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"experiment": "x", "stages": {}}))
    assert read_missing(tmp_path) is None
    part = partial_plan(_planned(), {"adapt": LOG}, set(GRAPH) - {"adapt"})
    write_missing(tmp_path, part)
    record = read_missing(tmp_path)
    assert record is not None and record["arms"] == ["AFA", "relearned"]
    assert banner_lines(record) == banner_lines(part.record())
    write_missing(tmp_path, None)
    assert read_missing(tmp_path) is None
    assert json.loads((tmp_path / "run.json").read_text()) == {"experiment": "x", "stages": {}}


def test_each_banner_line_is_a_box_of_its_own(tmp_path: Path) -> None:
    rep = Report("t", banner="first line\nArm AFA is missing: stage adapt failed")
    md = rep.to_markdown()
    assert "> **first line**\n" in md and "> **Arm AFA is missing: stage adapt failed**\n" in md
    page = rep.to_html(tmp_path)
    assert page.count('<p class="banner">') == 2
    assert '<p class="banner">' not in Report("t").to_html(tmp_path)


def test_left_out_stages_leave_the_run_record_and_the_stage_links(tmp_path: Path) -> None:
    record = {"stages": {"data": {"status": "run"}, "adapt": {"status": "run"}}}
    (tmp_path / "run.json").write_text(json.dumps(record))
    for name in ("data", "adapt"):
        (tmp_path / "entries" / name).mkdir(parents=True)
        link_stage(tmp_path, name, tmp_path / "entries" / name)
    forget_stages(tmp_path, ["adapt", "eval_afa"])
    assert list(json.loads((tmp_path / "run.json").read_text())["stages"]) == ["data"]
    assert (tmp_path / "stages" / "data").is_symlink()
    assert not (tmp_path / "stages" / "adapt").exists()
    assert (tmp_path / "entries" / "adapt").is_dir()  # the cache entry stays
