"""The lf_mlf protocol end to end through the CLI on configs/lf_mlf_smoke.yaml (Bible, nano
model).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from partial_run import assert_partial_report
from rebuild import assert_report_rebuilds

from golden import mismatches
from polymnesia.cli.main import main
from polymnesia.io import read_jsonl
from polymnesia.testing import corpus, save_tiny, tiny_bpe, tiny_sentencepiece

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "lf_mlf_smoke.yaml")
FAST = ["methods=[uniform,lf_mlf]", "seeds=[0,1]"]


def test_lf_mlf_smoke_report(isolated_cache: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["run", CONFIG, *FAST, "--run-dir", str(run)]) == 0
    assert mismatches(run, "lf_mlf_smoke", subset=True) == []  # scores as before the restructuring
    scores = read_jsonl(run / "results" / "scores.jsonl")
    models = {s["model"] for s in scores}
    assert {"Uniform-MLF", "LF-MLF", "SLF-en", "SLF-de", "SLF-fr", "base"} <= models
    acc = [s for s in scores if s["metric"] == "accuracy"]
    assert {s["group"] for s in acc} == {"source", "target"} and all(
        0 <= s["value"] <= 1 for s in acc
    )
    assert {s["seed"] for s in acc} == {0, 1}
    assert any(s["metric"] == "lm_loss" for s in scores)
    for rel in (
        "results/zero_shot.csv",
        "results/fine_tuning.csv",
        "results/forgetting.csv",
        "report.md",
    ):
        assert (run / rel).exists(), rel
    text = (run / "report.md").read_text()
    assert "Zero-shot performance" in text and "F_p" in text and "LF-MLF" in text
    # one seed of LF-MLF lost for good: the arm is left out whole, both seeds
    record = assert_partial_report(CONFIG, FAST, run, "ft_main_lf_mlf_s1", "LF-MLF", tmp_path / "p")
    assert record["stages"]["ft_main_lf_mlf_s0"]["state"] == "left out"
    assert_report_rebuilds(run, isolated_cache, tmp_path / "copy")


def test_lf_mlf_bad_input(
    isolated_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", CONFIG, "sources=[en]", "--dry-run"]) != 0
    assert "T >= 2" in capsys.readouterr().err
    assert main(["run", CONFIG, "methods=[uniform,nope]", "--dry-run"]) != 0
    assert "nope" in capsys.readouterr().err
    assert main(["run", CONFIG, "sources=[en,sw]", "--dry-run"]) != 0
    assert "not pretraining languages" in capsys.readouterr().err
    with pytest.warns(UserWarning, match="also sources"):
        main(["run", CONFIG, "targets=[es,en]", "--dry-run"])


#: a loaded base fine-tuned as it is: its F_p is its own pre-training loss (Section 3.1)
LOADED = {"xlm-roberta": ("mlm_loss", "forgetting_mlm"), "llama": ("lm_loss", "forgetting")}
TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1}
ONE_ARM = ["methods=[uniform,lf_mlf]", "seeds=[0]", "slf=false"]


def _tiny_folder(arch: str, folder: Path) -> Path:
    texts = corpus(("en", "de", "fr", "es"))
    if arch == "xlm-roberta":  # XLM-R's positions start after the pad: 128 + 2
        tok, _ = tiny_sentencepiece(texts, 400, "unigram")
        return save_tiny(
            folder, arch, tok, num_attention_heads=2, max_position_embeddings=130, **TINY
        )
    return save_tiny(folder, arch, tiny_bpe(texts, 400), num_attention_heads=2, **TINY)


@pytest.mark.parametrize("arch", list(LOADED))
def test_f_p_of_a_loaded_model_is_its_own_pretraining_loss(
    arch: str, isolated_cache: Path, tmp_path: Path
) -> None:
    """An encoder's F_p is a masked-LM loss, a decoder's a causal-LM loss; never both."""
    loss, table = LOADED[arch]
    other = "lm_loss" if loss == "mlm_loss" else "mlm_loss"
    folder = _tiny_folder(arch, tmp_path / arch)
    run = tmp_path / "run"
    args = [f"pretrain.model.name_or_path={folder}", *ONE_ARM, "--run-dir", str(run)]
    assert main(["run", CONFIG, *args]) == 0
    scores = read_jsonl(run / "results" / "scores.jsonl")
    rows = [s for s in scores if s["metric"] == loss]
    langs = ["en", "de", "fr", "es"]
    assert sorted((s["model"], s["lang"]) for s in rows) == sorted(
        (m, x) for m in ("base", "Uniform-MLF", "LF-MLF") for x in langs
    )
    assert all(s["group"] == "forgetting" and math.isfinite(s["value"]) for s in rows)
    base = {s["lang"]: s["value"] for s in rows if s["model"] == "base"}
    assert any(abs(s["value"] - base[s["lang"]]) > 1e-4 for s in rows)  # the tuned body is scored
    assert not any(s["metric"] in (other, "perplexity") for s in scores)
    plan = (run / "run.json").read_text()
    assert "import_model" in plan and "pretraining_loss" in plan and "train_tokenizer" not in plan
    csv = (run / "results" / f"{table}.csv").read_text()
    assert "LF-MLF" in csv and "Uniform-MLF" in csv
    unit = "masked-LM loss, nats/masked token" if arch == "xlm-roberta" else "causal-LM loss"
    text = (run / "report.md").read_text()
    assert unit in text and "LF-MLF forgets the pretraining objective less" in text


def test_f_p_is_zero_when_fine_tuning_does_not_move_the_body(
    isolated_cache: Path, tmp_path: Path
) -> None:
    """The reference and the arms are scored on the same masks: a body that (almost) does not
    move keeps the base model's masked-LM loss text by text."""
    folder = _tiny_folder("xlm-roberta", tmp_path / "xlmr")
    run = tmp_path / "run"
    args = [f"pretrain.model.name_or_path={folder}", *ONE_ARM, "finetune.lr=1e-12"]
    assert main(["run", CONFIG, *args, "--run-dir", str(run)]) == 0
    scores = read_jsonl(run / "results" / "scores.jsonl")
    base = {s["lang"]: s["value"] for s in scores if s["model"] == "base"}
    arms = [s for s in scores if s["metric"] == "mlm_loss" and s["model"] != "base"]
    assert len(arms) == 8
    for s in arms:
        assert s["value"] == pytest.approx(base[s["lang"]], abs=1e-6)


def test_f_p_of_a_task_with_its_own_data_on_forgetting_data(
    isolated_cache: Path, tmp_path: Path
) -> None:
    """A task that brings its own data has F_p when ``forgetting_data`` names held-out text:
    the reference and every main arm are scored on that source's test split."""
    folder = _tiny_folder("xlm-roberta", tmp_path / "xlmr")
    run = tmp_path / "run"
    own = "task.data={source: bible, max_train_per_lang: 200, max_eval_per_lang: 40}"
    args = [f"pretrain.model.name_or_path={folder}", *ONE_ARM, own]
    fp = [
        "forgetting_data={source: udhr, split_fractions: [0.5, 0.1, 0.4]}",
        "evaluate.forgetting_texts=100",
    ]
    assert main(["run", CONFIG, *args, *fp, "--run-dir", str(run)]) == 0
    scores = read_jsonl(run / "results" / "scores.jsonl")
    rows = [s for s in scores if s["metric"] == "mlm_loss"]
    assert sorted((s["model"], s["lang"]) for s in rows) == sorted(
        (m, x) for m in ("base", "Uniform-MLF", "LF-MLF") for x in ("en", "de", "fr", "es")
    )
    udhr = run / "stages" / "data_forgetting"
    for s in rows:  # every UDHR test paragraph (40% of 51), not the Bible's test verses
        assert s["n"] == len(read_jsonl(udhr / s["lang"] / "test.jsonl")) >= 15
    record = (run / "run.json").read_text()
    assert "data_forgetting" in record
    caption = "Held-out test text of the udhr source (forgetting_data) in en, de, fr, es"
    assert caption in (run / "report.md").read_text()
    without = tmp_path / "without"
    assert main(["run", CONFIG, *args, "--run-dir", str(without)]) == 0
    scores = read_jsonl(without / "results" / "scores.jsonl")
    assert not [s for s in scores if s["group"] == "forgetting"]  # no shared text: no F_p
