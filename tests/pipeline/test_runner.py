"""The stage cache: fingerprints, reuse, resume status, and plan errors, with toy stages."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field

from polymnesia.config.base import FINGERPRINTED_UNLESS_DEFAULT, NOT_FINGERPRINTED, StrictModel
from polymnesia.errors import PolymnesiaError
from polymnesia.io import atomic_write_text
from polymnesia.pipeline.runner import plan, run_pipeline
from polymnesia.pipeline.stage import STAGES, Stage, StageContext, StageSpec
from polymnesia.results import Score

CALLS: list[str] = []


class Params(StrictModel):
    value: int


@STAGES.register("test_write", "writes its value (tests only)")
class Write(Stage):
    def run(self, ctx: StageContext) -> list[Score]:
        CALLS.append(ctx.spec.name)
        atomic_write_text(ctx.out_dir / "value.txt", str(ctx.params.value))
        return [Score(model="m", lang="en", metric="value", value=float(ctx.params.value))]


@STAGES.register("test_add", "adds its value to its input's (tests only)")
class Add(Stage):
    resumable = True

    def run(self, ctx: StageContext) -> list[Score]:
        CALLS.append(ctx.spec.name)
        base = int((ctx.input("src") / "value.txt").read_text())
        atomic_write_text(ctx.out_dir / "value.txt", str(base + ctx.params.value))
        return []


def specs(a: int = 1, b: int = 2) -> list[StageSpec]:
    return [
        StageSpec("a", "test_write", Params(value=a)),
        StageSpec("b", "test_add", Params(value=b), {"src": "a"}),
    ]


def test_runs_then_reuses(isolated_cache: Path, tmp_path: Path):
    CALLS.clear()
    entries = run_pipeline(specs(), None, log=lambda m: None)
    assert (entries["b"] / "value.txt").read_text() == "3" and CALLS == ["a", "b"]
    assert [p.status for p in plan(specs())] == ["reuse", "reuse"]
    run_pipeline(specs(), None, log=lambda m: None)
    assert CALLS == ["a", "b"]  # nothing recomputed


def test_fingerprint_follows_params_inputs_and_version(isolated_cache: Path):
    base = [p.fingerprint for p in plan(specs())]
    changed_b = [p.fingerprint for p in plan(specs(b=5))]
    changed_a = [p.fingerprint for p in plan(specs(a=7))]
    assert changed_b[0] == base[0] and changed_b[1] != base[1]
    assert changed_a[0] != base[0] and changed_a[1] != base[1]  # an input changed
    old = Add.version
    try:
        Add.version = "2"
        assert plan(specs())[1].fingerprint != base[1]
    finally:
        Add.version = old


class Before(StrictModel):
    value: int


class After(StrictModel):
    """``Before`` with two options added later: one that changes results, one that does not."""

    value: int
    echo: bool = Field(False, json_schema_extra=FINGERPRINTED_UNLESS_DEFAULT)
    headline: str = Field("x", json_schema_extra=NOT_FINGERPRINTED)


def test_an_option_added_later_keeps_the_old_fingerprints_until_it_is_set() -> None:
    def fp(params: StrictModel) -> str:
        return StageSpec("a", "test_write", params).fingerprint({})

    old = fp(Before(value=1))
    assert fp(After(value=1)) == old  # cached entries of configs that do not use it stay valid
    assert fp(After(value=1, headline="y")) == old  # not fingerprinted at all
    assert fp(After(value=1, echo=True)) != old
    assert fp(After(value=1, echo=False)) == old  # set to its default: the same stage


class Outer(StrictModel):
    inner: After
    many: list[After] = []
    named: dict[str, After] = {}


def test_marks_hold_in_sections_nested_in_a_stage_s_parameters() -> None:
    """A section inside the parameters (a stage's ``train:``, a task in a list) keeps its
    fields' marks: a not-fingerprinted field changes nothing, a new option only when set."""

    def fp(**kw: object) -> str:
        return StageSpec("a", "test_write", Outer.model_validate(kw)).fingerprint({})

    base = fp(inner={"value": 1}, many=[{"value": 2}], named={"x": {"value": 3}})
    same = fp(
        inner={"value": 1, "headline": "y"},
        many=[{"value": 2, "headline": "z"}],
        named={"x": {"value": 3, "echo": False}},
    )
    assert same == base
    for changed in (
        fp(inner={"value": 1, "echo": True}, many=[{"value": 2}], named={"x": {"value": 3}}),
        fp(inner={"value": 1}, many=[{"value": 2, "echo": True}], named={"x": {"value": 3}}),
        fp(inner={"value": 1}, many=[{"value": 2}], named={"x": {"value": 3, "echo": True}}),
        fp(inner={"value": 1}, many=[{"value": 2}], named={"x": {"value": 4}}),
    ):
        assert changed != base


def test_partial_entries_resume_or_restart(isolated_cache: Path):
    planned = plan(specs())
    for p in planned:  # an interrupted run left folders without the completion marker
        p.entry.mkdir(parents=True)
        (p.entry / "junk").write_text("x")
    again = plan(specs())
    assert [p.status for p in again] == ["run", "resume"]
    CALLS.clear()
    entries = run_pipeline(specs(), None, log=lambda m: None)
    assert not (entries["a"] / "junk").exists()  # non-resumable: restarted clean
    assert (entries["b"] / "junk").exists()  # resumable: partial output kept for the stage


def test_plan_errors(isolated_cache: Path):
    with pytest.raises(PolymnesiaError, match="unknown stage 'test_wrte'"):
        plan([StageSpec("a", "test_wrte", Params(value=1))])
    with pytest.raises(PolymnesiaError, match="refers to unknown or later stage 'z'"):
        plan([StageSpec("b", "test_add", Params(value=1), {"src": "z"})])
    with pytest.raises(PolymnesiaError, match="duplicate stage names"):
        plan(
            [
                StageSpec("a", "test_write", Params(value=1)),
                StageSpec("a", "test_write", Params(value=2)),
            ]
        )


def test_run_folder_collects_scores(isolated_cache: Path, tmp_path: Path):

    from polymnesia.io import read_jsonl
    from polymnesia.pipeline.run_dir import prepare_run_dir

    class Cfg(StrictModel):
        experiment: str = "x"
        name: str = "toy"

    prepare_run_dir(tmp_path / "run", Cfg())
    run_pipeline(specs(), tmp_path / "run", log=lambda m: None)
    assert read_jsonl(tmp_path / "run" / "results" / "scores.jsonl")[0]["value"] == 1.0
    assert (tmp_path / "run" / "stages" / "b" / "value.txt").read_text() == "3"


def test_spread_sample_is_parallel_and_spread():
    from polymnesia.data.records import TextRecord
    from polymnesia.stages.data import spread_sample

    ids = [f"{b}.1.{v}" for b in range(1, 67) for v in range(1, 30)]
    en = [TextRecord(i, "en", "x") for i in ids]
    fr = [
        TextRecord(i, "fr", "y") for i in ids if not i.endswith(".7")
    ]  # a language missing some verses
    a, b = spread_sample(en, 100, 0), spread_sample(fr, 100, 0)
    assert len({r.id.split(".")[0] for r in a}) > 30  # many books, not just the first
    common = {r.id for r in a} & {r.id for r in b}
    assert len(common) > 90  # the same ids where both languages have them
    assert spread_sample(en, None, 0) != en and sorted(
        r.id for r in spread_sample(en, None, 0)
    ) == sorted(ids)
