"""Script for the 2-process masked-LM test: the ``pretraining_loss`` stage on an encoder and
the gathered per-text columns of ``mlm_items``, saved as JSON.

Run as ``python mlm_two_procs.py FOLDER OUT`` or under ``torch.distributed.run
--nproc_per_node 2``; FOLDER holds ``model/model`` (an encoder) and ``data/`` (written by the
test).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from polymnesia.data.prepared import read_texts
from polymnesia.evaluation.masked import mlm_items
from polymnesia.models.build import load_encoder
from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.runtime import current, partial_state
from polymnesia.stages.evaluate_lm import EvaluateLMParams, PretrainingLoss
from polymnesia.tokenizers.bpe import load_tokenizer

if __name__ == "__main__":
    folder, out = Path(sys.argv[1]), Path(sys.argv[2])
    state = partial_state()
    params = EvaluateLMParams(label="M", languages={"en": "g", "fr": "g"})
    entry = out / f"stage-{state.process_index}"
    entry.mkdir(parents=True)
    inputs = {"model": folder / "model", "data": folder / "data"}
    ctx = StageContext(
        StageSpec("base_lm", "pretraining_loss", params),
        entry,
        inputs,
        is_main_process=state.is_main_process,
    )
    results: dict[str, object] = {"stage": [asdict(s) for s in PretrainingLoss().run(ctx)]}
    model = load_encoder(folder / "model" / "model").eval()
    tok = load_tokenizer(str(folder / "model" / "model"))
    texts = [t for lang in ("en", "fr") for t in read_texts(folder / "data", lang, "test", None)]
    _, cols = mlm_items(model, tok, texts, batch_size=2, runtime=current())
    results["columns"] = cols
    state.wait_for_everyone()
    if state.is_main_process:
        (out / "scores.json").write_text(json.dumps(results))
    from polymnesia.runtime import shutdown

    shutdown()  # leave the gloo group before exit, as the CLI does
