"""Typed stage contracts: every kind declares its parameter type, input roles and outputs, and a
spec that does not match is refused at plan time (plan, validate, run --dry-run, polymnesia
plan) in one line, before anything runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.config.base import StrictModel
from polymnesia.errors import ConfigError
from polymnesia.experiments import EXPERIMENTS, load_config
from polymnesia.io import atomic_write_text
from polymnesia.pipeline.runner import check_specs, plan
from polymnesia.pipeline.stage import STAGES, Family, Role, Stage, StageContext, StageSpec
from polymnesia.results import Score
from polymnesia.stages.common import DATA, MODEL, MODELS, TOKENIZER
from polymnesia.stages.evaluate_lm import EvaluateLMParams
from polymnesia.stages.merge import MergeParams
from polymnesia.stages.pretrain import PretrainParams

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")


def quickstart_specs() -> list[StageSpec]:
    cfg = load_config(QUICKSTART, [])
    return list(EXPERIMENTS.get(cfg.experiment).build(cfg))


def by_name(specs: list[StageSpec], name: str) -> StageSpec:
    return next(s for s in specs if s.name == name)


def test_every_built_in_kind_declares_its_contract() -> None:
    for name in STAGES.names():
        cls = STAGES.get(name)
        if not cls.__module__.startswith("polymnesia.stages"):
            continue
        assert cls.Params is not None, f"{name} declares no parameter type"
        assert cls.inputs is not None, f"{name} declares no input roles"
        for role in cls.inputs:
            assert isinstance(role, (Role, Family)), (name, role)


def test_the_quickstart_pipeline_meets_its_contracts() -> None:
    specs = quickstart_specs()
    check_specs(specs)
    assert [s.kind for s in specs] == ["prepare_data", "train_tokenizer", "pretrain", "evaluate_lm"]


def test_roles_are_plain_strings_in_a_spec_so_fingerprints_do_not_move() -> None:
    params = EvaluateLMParams(label="x", languages={"en": "g"})
    with_roles = StageSpec("e", "evaluate_lm", params, {DATA: "d", MODEL: "m"})
    with_strings = StageSpec("e", "evaluate_lm", params, {"data": "d", "model": "m"})
    assert all(type(r) is str for r in with_roles.inputs)
    fps = {"d": "0" * 64, "m": "1" * 64}
    assert with_roles.fingerprint(fps) == with_strings.fingerprint(fps)


def test_parameters_of_another_kind_are_refused() -> None:
    specs = quickstart_specs()
    ev = by_name(specs, "eval_lm") if any(s.name == "eval_lm" for s in specs) else specs[-1]
    pretrain = by_name(specs, "pretrain")
    specs[specs.index(pretrain)] = dataclasses.replace(pretrain, params=ev.params)
    with pytest.raises(ConfigError) as e:
        plan(specs)
    assert str(e.value) == (
        "stage 'pretrain' (pretrain): parameters are EvaluateLMParams; pretrain takes "
        "PretrainParams"
    )


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (
            {"data": "data", "tokenizer": "tokenizer", "tokeniser": "tokenizer"},
            "stage 'pretrain' (pretrain): unknown input role 'tokeniser'; "
            "pretrain takes data, tokenizer",
        ),
        (
            {"data": "data"},
            "stage 'pretrain' (pretrain): input role 'tokenizer' is missing; "
            "pretrain takes data, tokenizer",
        ),
        (
            {"data": "data", "tokenizer": "data"},
            "stage 'pretrain' (pretrain): input 'tokenizer' is stage 'data' (prepare_data), "
            "which writes LANG/SPLIT.jsonl, not the tokenizer/ that 'tokenizer' reads",
        ),
    ],
)
def test_mismatched_input_roles_are_refused(inputs: dict[str, str], message: str) -> None:
    specs = quickstart_specs()
    pretrain = by_name(specs, "pretrain")
    specs[specs.index(pretrain)] = dataclasses.replace(pretrain, inputs=inputs)
    with pytest.raises(ConfigError) as e:
        plan(specs)
    assert str(e.value) == message


def test_a_plugin_names_an_input_role_the_spec_must_give() -> None:
    specs = quickstart_specs()
    pretrain = by_name(specs, "pretrain")
    p: PretrainParams = pretrain.params
    entry = {"name": "layer_freezing", "strategy": "most_changed", "before": "base", "pct": 50}
    train = p.train.with_plugins(entry)
    tuned = StageSpec(
        "tuned", "pretrain", p.model_copy(update={"train": train}), dict(pretrain.inputs)
    )
    with pytest.raises(ConfigError, match=r"^stage 'tuned' \(pretrain\): input role 'base' is "):
        check_specs([*specs, tuned])
    check_specs([*specs, dataclasses.replace(tuned, inputs={**tuned.inputs, "base": "pretrain"})])


def test_a_numbered_family_without_a_gap() -> None:
    specs = quickstart_specs()
    merged = StageSpec("merged", "merge_models", MergeParams(method="average"), MODELS.bind([]))
    with pytest.raises(ConfigError, match=r"input role 'model_0' is missing; merge_models takes"):
        check_specs([*specs, merged])
    gap = {MODELS(0): "pretrain", MODELS(2): "pretrain"}
    with pytest.raises(ConfigError) as e:
        check_specs([*specs, dataclasses.replace(merged, inputs=gap)])
    assert str(e.value) == (
        "stage 'merged' (merge_models): inputs model_0, model_2 leave a gap; "
        "number them model_0, model_1, ... without one"
    )
    ok = MODELS.bind(["pretrain", "pretrain"])
    check_specs([*specs, dataclasses.replace(merged, inputs=ok)])
    assert MODELS.members({"model_10": 1, "model_2": 1, "base": 1}) == ["model_2", "model_10"]


@pytest.mark.parametrize("command", [["validate"], ["run", "--dry-run"], ["plan"]])
def test_the_cli_refuses_a_mis_built_spec_in_one_line(
    command: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    isolated_cache: Path,
) -> None:
    exp = EXPERIMENTS.get("language_modeling")
    built = exp.build

    def mis_built(cfg: object) -> list[StageSpec]:
        specs = list(built(cfg))  # type: ignore[arg-type]
        return [
            dataclasses.replace(s, inputs={DATA: "data"}) if s.kind == "pretrain" else s
            for s in specs
        ]

    monkeypatch.setattr(exp, "build", mis_built)
    argv = [command[0], QUICKSTART, *command[1:]]
    if command[0] == "run":
        argv += ["--run-dir", str(isolated_cache / "run")]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    want = f"input role '{TOKENIZER}' is missing; pretrain takes data, tokenizer"
    assert any(want in line for line in err), err
    assert not list(isolated_cache.glob("stages/pretrain/*"))  # nothing was built


class ValueParams(StrictModel):
    value: int


@STAGES.register("test_value", "writes its value to value.txt (tests only)")
class WriteValue(Stage[ValueParams]):
    inputs = ()
    outputs = ("value.txt",)

    def run(self, ctx: StageContext[ValueParams]) -> list[Score]:
        atomic_write_text(ctx.out_dir / "value.txt", str(ctx.params.value))
        return []


NEW_KIND = '''
"""A stage kind written as a new module: its parameters, roles, outputs and run."""
from polymnesia.config.base import StrictModel
from polymnesia.io import atomic_write_text
from polymnesia.pipeline.stage import STAGES, Role, Stage, StageContext
from polymnesia.results import Score

#: the folder whose value.txt this kind doubles
SOURCE = Role("source", "value.txt")


class DoubleParams(StrictModel):
    factor: int = 2


@STAGES.register("test_double", "doubles its source's value (tests only)")
class Double(Stage[DoubleParams]):
    inputs = (SOURCE,)
    outputs = ("value.txt",)

    def run(self, ctx: StageContext[DoubleParams]) -> list[Score]:
        value = int((ctx.input(SOURCE) / "value.txt").read_text()) * ctx.params.factor
        atomic_write_text(ctx.out_dir / "value.txt", str(value))
        return [Score(model="m", lang="en", metric="value", value=float(value))]
'''


def test_a_new_kind_is_one_module(tmp_path: Path, isolated_cache: Path) -> None:
    """Adding a kind touches one file under src/ (its module; the protocol that builds its
    spec is the second): registration, contract and plan-time checks come with it."""
    import importlib.util

    from polymnesia.pipeline.runner import run_pipeline

    path = tmp_path / "double_kind.py"
    path.write_text(NEW_KIND, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("double_kind", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    write = StageSpec("a", "test_value", ValueParams(value=21))
    double = StageSpec("b", "test_double", module.DoubleParams(), {module.SOURCE: "a"})
    entries = run_pipeline([write, double], None, log=lambda _: None)
    assert (entries["b"] / "value.txt").read_text() == "42"
    with pytest.raises(ConfigError, match=r"^stage 'b' \(test_double\): unknown input role"):
        plan([write, dataclasses.replace(double, inputs={"src": "a"})])
    with pytest.raises(ConfigError, match=r"are ValueParams; test_double takes DoubleParams"):
        plan([write, dataclasses.replace(double, params=ValueParams(value=1))])
