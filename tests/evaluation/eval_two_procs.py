"""Script for the 2-process evaluation test: run the sharded evaluation stages, save the scores.

Run as ``python eval_two_procs.py FOLDER OUT`` or under ``torch.distributed.run
--nproc_per_node 2``; FOLDER holds ``model/model`` and ``data/`` (written by the test).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from polymnesia.data.prepared import read_split
from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.runtime import current, partial_state
from polymnesia.stages.evaluate_isotropy import EvaluateIsotropy, EvaluateIsotropyParams
from polymnesia.stages.evaluate_lm import EvaluateLM, EvaluateLMParams
from polymnesia.stages.evaluate_translation import EvaluateTranslation, EvaluateTranslationParams
from polymnesia.stages.evaluate_zero_shot import EvaluateZeroShot, EvaluateZeroShotParams
from polymnesia.tasks.classification import load_classifier
from polymnesia.tasks.config import TaskConfig
from polymnesia.tasks.kinds import build_examples, evaluate_task, task_records

LANGS = {"en": "g", "fr": "g"}
TASKS = {
    "task_sequence": TaskConfig(kind="sequence", metric="accuracy", num_labels=4),
    "task_span": TaskConfig(
        kind="span", metric="squad_f1", constructed="genre_question", passage_verses=2
    ),
}


def task_scores(folder: Path, task: TaskConfig) -> list[dict[str, object]]:
    """Task scoring as the fine-tuning stages run it (sharded, gathered), with every column."""
    n = 2 if task.kind == "span" else 4
    model, tok = load_classifier(folder / "model" / "model", n, task.kind, seed=7)
    genres: dict[str, int] = {}
    ex = {}
    for lang in LANGS:
        recs = [
            {**r, "label": genres.setdefault(r["meta"]["genre"], len(genres))}
            for r in read_split(folder / "data", lang, "test")
        ]
        ex[lang] = build_examples(task_records(recs, task, 0), task, tok, train=False)
    got = evaluate_task(model, ex, task, batch_size=2, runtime=current())
    return [
        {"lang": lang, "metric": m, "value": v, "extra": {"columns": r.columns, "ids": r.ids}}
        for lang, (r, values) in got.items()
        for m, v in values.items()
    ]


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
    for name, task in TASKS.items():
        results[name] = task_scores(folder, task)
    state.wait_for_everyone()
    if state.is_main_process:
        (out / "scores.json").write_text(json.dumps(results))
    from polymnesia.runtime import shutdown

    shutdown()  # leave the gloo group before exit, as the CLI does
