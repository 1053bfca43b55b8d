"""``polymnesia export`` of a lifelong LoRA step, which holds an adapter and no model: the
export is the step's base with the adapter merged in, a whole classifier that plain
transformers loads, and gives the logits the adapter gives on its base through PEFT (loaded
from the export's ``adapter/``); the card names the base it was merged into."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard
from peft import PeftModel
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from polymnesia.cli.main import main

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "lifelong_smoke.yaml")
#: the smoke config shrunk to SHARED LoRA on two languages, one order: 2 adapter-only steps
SHRUNK = ["methods=[shared_lora]", "orders=[{name: res, kind: resource}]", "languages=[en,fr]"]


def test_a_lora_step_exports_merged_into_its_base(
    isolated_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, dest = tmp_path / "run", tmp_path / "exported"
    assert main(["run", CONFIG, *SHRUNK, "--run-dir", str(run)]) == 0
    stages = json.loads((run / "run.json").read_text())["stages"]
    step = "shared_lora_r4_res_1"
    entry = Path(stages[step]["entry"])
    assert (entry / "adapter" / "adapter_config.json").is_file()
    assert not (entry / "model").exists()  # an adapter-only stage
    capsys.readouterr()
    assert main(["export", str(run), step, str(dest)]) == 0
    assert f"exported {step} to {dest}" in capsys.readouterr().out

    merged = AutoModelForSequenceClassification.from_pretrained(dest).eval()
    tokenizer = AutoTokenizer.from_pretrained(dest)
    base_folder = Path(stages["pretrain"]["entry"]) / "model"
    base = AutoModelForSequenceClassification.from_pretrained(
        base_folder, num_labels=merged.config.num_labels, pad_token_id=tokenizer.pad_token_id
    )
    adapted = PeftModel.from_pretrained(base, str(dest / "adapter")).eval()
    batch = tokenizer(
        ["In the beginning", "Au commencement Dieu"], return_tensors="pt", padding=True
    )
    with torch.no_grad():
        want, got = adapted(**batch).logits, merged(**batch).logits
    assert got.shape == (2, 9)
    assert torch.allclose(got, want, atol=1e-5)
    q = "model.layers.0.self_attn.q_proj.weight"  # LoRA's target, merged into the base's
    start = AutoModelForSequenceClassification.from_pretrained(base_folder, num_labels=9)
    assert not torch.equal(merged.state_dict()[q], start.state_dict()[q])

    card = ModelCard.load(dest / "README.md")
    data = card.data.to_dict()
    assert data["pipeline_tag"] == "text-classification"
    assert data["polymnesia"]["merged_adapter"] == {"base_stage": "pretrain", "folder": "adapter"}
    assert "the adapter merged in" in card.text
