"""F_p records name the fine-tuned task whose model they measure (lf_mlf)."""

from __future__ import annotations

from pathlib import Path

import yaml

from polymnesia.experiments.lf_mlf.claims import forgetting_by_task
from polymnesia.experiments.loading import load_config
from polymnesia.items import ItemSet
from polymnesia.results import Score

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "lf_mlf_smoke.yaml"


def _records(task: str) -> tuple[list[Score], list[ItemSet]]:
    scores = [
        Score("LF-MLF", "en", "lm_loss", 5.0, task=task, group="forgetting", seed=0),
        Score("base", "en", "perplexity", 90.0, task="lm", group="forgetting"),
        Score("LF-MLF", "es", "accuracy", 0.5, task="bible_genre", group="target", seed=0),
    ]
    items = [
        ItemSet(
            "LF-MLF",
            "en",
            "lm",
            [0],
            {"nll": [1.0], "tokens": [1.0], "bytes": [1.0]},
            task=task,
            group="forgetting",
            seed=0,
        )
    ]
    return scores, items


def test_entries_cached_before_get_the_only_task_and_nothing_else_changes() -> None:
    cfg = load_config(SMOKE)
    scores, items = forgetting_by_task(cfg, *_records("lm"))
    assert [s.task for s in scores] == ["bible_genre", "lm", "bible_genre"]  # base keeps "lm"
    assert [s.task for s in items] == ["bible_genre"]
    assert forgetting_by_task(cfg, *_records("bible_genre")) == _records("bible_genre")


def test_with_several_tasks_old_records_stay_as_they_are(tmp_path: Path) -> None:
    data = yaml.safe_load(SMOKE.read_text())
    task = data.pop("task")
    data["tasks"] = [task, {**task, "name": "other"}]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(data))
    cfg = load_config(tmp_path / "c.yaml")
    assert forgetting_by_task(cfg, *_records("lm")) == _records("lm")
