"""Bad configs and overrides: one `polymnesia: error:` line at validation, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.experiments import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QUICK = str(CONFIGS / "quickstart.yaml")

#: (overrides, text the one error line must hold)
BAD_OVERRIDES = [
    (["train.lr=.inf"], "'train.lr': inf: numbers in a config must be finite"),
    (["train.weight_decay=.nan"], "'train.weight_decay'"),
    (["model.init_std=-.inf"], "must be finite"),
    (["train.steps=true"], "'train.steps': True: a boolean is not accepted"),
    (["train.batch_size=false"], "a boolean is not accepted"),
    (["train.betas=[2,-1]"], "each of the AdamW betas must be in [0, 1)"),
    (["train.betas=[true,0.9]"], "a boolean is not accepted"),
    (["train.grad_clip=-1"], "'train.grad_clip': -1"),
    (["train.eval_every=-5"], "'train.eval_every': -5"),
    (["data.options={bogus: 1}"], "unknown key 'data.options.bogus' for data source 'bible'"),
    (["data.source=udhr", "data.options={langs: [en]}"], "accepted: languages"),
    (["data.split_fractions=[1,0,0]"], "so that no split is empty"),
    (["data.split_fractions=[0.5,0.5,0]"], "so that no split is empty"),
    (["data.split_fractions=[0.8,0.1,0.2]"], "summing to 1"),
    (["data.source=local"], "missing required key 'data.options.path'"),
    (["data.source=local", "data.options.path=/nonexistent/x"], "no such file or folder"),
    (["name=../../../x"], "'name': '../../../x'"),
    (["name=/tmp/x"], "'name': '/tmp/x'"),
    (["name=a/b"], "without '/'"),
    (["name=''"], "'name': ''"),
    (["name=.."], "'name': '..'"),
    (["model.name_or_path=./no/such/model"], "local model folder './no/such/model' does not exist"),
    (
        ["tokenizer.name_or_path=./no/such/tok"],
        "local tokenizer folder './no/such/tok' does not exist",
    ),
    (["model.hidden_size=33"], "not divisible by num_attention_heads"),
    (["train.progress_bar=0"], "nor a number where a boolean is"),
    # the Bible has 22 languages, known without fetching: refused before any stage runs
    (["groups.other=[de,eu]"], "source 'bible' has no language 'eu'; it has ar, bn, de,"),
]


@pytest.mark.parametrize(("overrides", "expected"), BAD_OVERRIDES)
def test_bad_override_is_one_line(isolated_cache, capsys, overrides, expected):  # type: ignore[no-untyped-def]
    for argv in (
        ["validate", QUICK, *[f"--set={o}" for o in overrides]],
        ["run", QUICK, *overrides, "--dry-run"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("polymnesia: error:") and len(err.splitlines()) == 1, err
        assert expected in err, err


#: (file content, text of the one error line)
BAD_FILES = [
    (b"experiment: language_modeling\nname: caf\xe9\n", "is not UTF-8 text"),
    (bytes(range(256)), "is not UTF-8 text"),
    (b"\x00\x01\x02binary", "malformed YAML"),
    (b"experiment: language_modeling\nname: a\nname: b\n", "key 'name' is given twice"),
    (
        b"experiment: language_modeling\nname: a\ntrain:\n  lr: 1.0e-3\n  lr: 2.0e-3\n",
        "given twice",
    ),
    (
        b"experiment: language_modeling\nname: a\ngroups: {pretraining: [en]}\ntrain: {lr: .inf}\n",
        "finite",
    ),
    (b"- a\n- b\n", "must be a YAML mapping"),
    (b"experiment: [unclosed\n", "malformed YAML"),
    # a merge key merges; a key given twice beside it is still refused
    (b"d: &d {a: 1}\ne:\n  <<: *d\n  b: 1\n  b: 2\n", "key 'b' is given twice"),
]


@pytest.mark.parametrize(("content", "expected"), BAD_FILES)
def test_bad_file_is_one_line(tmp_path, capsys, content, expected):  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err, err


def test_yaml_no_means_no(isolated_cache):  # type: ignore[no-untyped-def]
    """YAML 1.1 reads a bare `no` as false; only true/false are booleans here."""
    cfg = load_config(QUICK, ["train.mixed_precision=no", "groups.other=[no,de]"])
    assert cfg.train.mixed_precision == "no" and cfg.groups.other == ["no", "de"]
    assert load_config(QUICK, ["train.progress_bar=false"]).train.progress_bar is False


def test_remote_code_needs_the_command_line(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    from polymnesia.errors import PolymnesiaError
    from polymnesia.trust import allow_remote_code, remote_code

    assert main(["run", QUICK, "model.trust_remote_code=true", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "'model.trust_remote_code: true'" in err and "--trust-remote-code" in err
    assert (
        main(["run", QUICK, "model.trust_remote_code=true", "--dry-run", "--trust-remote-code"])
        == 0
    )
    try:
        assert remote_code(True, "model 'x'") is True
        allow_remote_code(False)
        with pytest.raises(PolymnesiaError, match="only for a run started with"):
            remote_code(True, "model 'x'")
        assert remote_code(False, "model 'x'") is False
    finally:
        allow_remote_code(False)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the refusal is a CPU's")
def test_fp16_training_on_a_cpu_is_refused_before_the_run(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Before any stage runs and before the run folder is made: one line naming the key."""
    run_dir = tmp_path / "run"
    assert main(["run", QUICK, "train.mixed_precision=fp16", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "train.mixed_precision=fp16 needs a GPU" in err and "bf16 or no" in err, err
    assert not run_dir.exists()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the refusals are a CPU's")
@pytest.mark.parametrize("kernel", ["flash_attention_2", "flex_attention"])
def test_an_attention_kernel_the_cpu_cannot_run_is_refused_before_the_run(  # type: ignore[no-untyped-def]
    isolated_cache, tmp_path, capsys, kernel
):
    run_dir = tmp_path / "run"
    assert (
        main(["run", QUICK, f"model.attn_implementation={kernel}", "--run-dir", str(run_dir)]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert (
        f"model.attn_implementation={kernel} needs" in err and "accepted here: sdpa, eager" in err
    )
    assert not run_dir.exists()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the refusal is a CPU's")
def test_only_data_runs_no_model_and_skips_the_preflight(
    isolated_cache, tmp_path, monkeypatch, capsys
):  # type: ignore[no-untyped-def]
    """`--only data` on the machine with internet prepares data for a GPU config whose
    training this machine could not run: the preflight must not refuse it."""
    import polymnesia.pipeline.runner as runner

    ran: list[list[str]] = []
    monkeypatch.setattr(
        runner, "run_pipeline", lambda specs, *a, **k: ran.append([s.name for s in specs])
    )
    argv = ["run", QUICK, "train.mixed_precision=fp16", "--run-dir", str(tmp_path / "run")]
    assert main([*argv, "--only", "data"]) == 0
    assert ran and "pretrain" not in ran[0]
    assert main([*argv, "--only", "data,training"]) == 2
    assert "needs a GPU" in capsys.readouterr().err
