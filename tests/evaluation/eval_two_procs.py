"""Script for the 2-process evaluation test: run the sharded evaluation stages, save the scores.

Run as ``python eval_two_procs.py FOLDER OUT`` or under ``torch.distributed.run
--nproc_per_node 2``; FOLDER holds ``model/model`` and ``data/`` (written by the test).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.runtime import partial_state
from polymnesia.stages.evaluate_isotropy import EvaluateIsotropy, EvaluateIsotropyParams
from polymnesia.stages.evaluate_lm import EvaluateLM, EvaluateLMParams
from polymnesia.stages.evaluate_translation import EvaluateTranslation, EvaluateTranslationParams
from polymnesia.stages.evaluate_zero_shot import EvaluateZeroShot, EvaluateZeroShotParams

LANGS = {"en": "g", "fr": "g"}

if __name__ == "__main__":
    folder, out = Path(sys.argv[1]), Path(sys.argv[2])
    state = partial_state()
    inputs = {"model": folder / "model", "data": folder / "data"}
    stages = {
        "lm": (EvaluateLM, EvaluateLMParams(label="M", languages=LANGS)),
        "zero_shot": (EvaluateZeroShot, EvaluateZeroShotParams(label="M", languages=LANGS)),
        "translation": (
            EvaluateTranslation,
            EvaluateTranslationParams(label="M", languages=LANGS, shots=1, max_new_tokens=4),
        ),
        "isotropy": (EvaluateIsotropy, EvaluateIsotropyParams(label="M", languages=LANGS)),
    }
    results = {}
    for name, (cls, params) in stages.items():
        assert cls.distributed, name
        entry = out / f"{name}-{state.process_index}"
        entry.mkdir(parents=True)
        ctx = StageContext(
            StageSpec(name, name, params),
            entry,
            inputs,
            is_main_process=state.is_main_process,
        )
        results[name] = [asdict(s) for s in cls().run(ctx)]
    state.wait_for_everyone()
    if state.is_main_process:
        (out / "scores.json").write_text(json.dumps(results))
