"""``polymnesia export`` end to end: the shrunk quickstart run (packaged UDHR, nano model), its
pretrained model exported, loaded with plain transformers, its card parsed with
huggingface_hub; the refusals are one line each, and the cache entry is left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard
from smoke import SMOKE
from transformers import AutoModelForCausalLM, AutoTokenizer

from polymnesia.cli.main import main
from polymnesia.io import read_jsonl
from polymnesia.metrics.base import scored_metrics
from polymnesia.pipeline.integrity import check_entry

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shrunk quickstart's run folder, run once for this module in a cache of its own."""
    root = tmp_path_factory.mktemp("export")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POLYMNESIA_CACHE", str(root / "cache"))
        assert main(["run", CONFIG, *SMOKE, "--run-dir", str(root / "run")]) == 0
    return root / "run"


def test_export_loads_with_transformers_and_its_card_parses(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = json.loads((run / "run.json").read_text())
    entry = Path(record["stages"]["pretrain"]["entry"])
    dest = tmp_path / "exported"
    capsys.readouterr()
    assert main(["export", str(run), "pretrain", str(dest)]) == 0
    assert f"exported pretrain to {dest}" in capsys.readouterr().out

    model = AutoModelForCausalLM.from_pretrained(dest)
    tokenizer = AutoTokenizer.from_pretrained(dest)
    ids = tokenizer("Everyone has the right to life", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.isfinite(model(ids).logits).all()

    card = ModelCard.load(dest / "README.md")
    data = card.data.to_dict()
    assert data["language"] == ["en", "ru", "ar", "zh"]  # the pretraining languages only
    assert data["license"] == "other" and data["pipeline_tag"] == "text-generation"
    assert "base_model" not in data  # trained from scratch
    block = data["polymnesia"]
    assert block["protocol"] == "language_modeling" and block["sources"] == ["udhr"]
    assert block["stage_fingerprint"] == record["stages"]["pretrain"]["fingerprint"]
    assert block["config_hash"] == record["config_hash"]
    summary = json.loads((entry / "train_summary.json").read_text())
    assert f"| optimizer steps | {summary['steps']} |" in card.text
    evaluated = [
        s for s in read_jsonl(run / "results" / "scores.jsonl") if s["stage"] == "evaluate"
    ]
    # 8 languages x the metrics registered for lm items (bits per byte, perplexity, word
    # perplexity)
    assert len(evaluated) == 8 * len(scored_metrics("lm")) == 24
    for s in evaluated:  # every score of the evaluation that read the model, with its interval
        row = f"| evaluate | lm | {s['metric']} | {s['lang']} | {s['group']} | {s['value']:.4g} |"
        low, high = s["ci_low"], s["ci_high"]
        # no interval where the bootstrap overflows (word perplexity of a text without spaces)
        iv = "–" if low is None or high is None else f"[{low:.4g}, {high:.4g}]"
        assert f"{row} {iv} | {s['n']} |" in card.text
    assert "UDHR texts are free to reproduce" in card.text

    assert not (entry / "model" / "README.md").exists()  # the card is the export's alone
    assert check_entry(entry, full=True).state == "ok"


def test_export_refusals_are_one_line_each(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    cases = [
        (["evaluate", str(tmp_path / "a")], "stage 'evaluate' (evaluate_lm) holds no model"),
        (["pretrian", str(tmp_path / "a")], "has no finished stage 'pretrian'"),
        (["pretrain", str(full)], "exists and is not empty"),
        (["pretrain", str(tmp_path / "a"), "--push-to-hub", "me/tiny"], "HF_HUB_OFFLINE is set"),
    ]
    errors = []
    for argv, words in cases:
        capsys.readouterr()
        assert main(["export", str(run), *argv]) == 2
        errors.append(capsys.readouterr().err)
        assert errors[-1].count("\n") == 1 and words in errors[-1], errors[-1]
    assert errors[0].endswith("; stages with a model: pretrain\n")
    assert errors[1].endswith("; stages with a model: pretrain\n")
    assert not (tmp_path / "a").exists()
