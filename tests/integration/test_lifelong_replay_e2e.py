"""The REPLAY arm of lifelong end to end: earlier languages' examples in the trained batches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from golden import GOLDEN, compare, score_table
from polymnesia.cli.main import main
from polymnesia.continual.replay import BUFFER_FILE, replay_count
from polymnesia.tasks.classification import ClassificationData

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "lifelong_smoke.yaml")
ARMS = [
    "methods=[replay]",
    "orders=[{name: resource, kind: resource}]",
    "replay={buffer: reservoir, size: 24, share: 0.25}",
]


def test_replay_arm_trains_on_earlier_languages_examples(
    isolated_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every training set the steps build, with the batches the loop draws from it, in order
    # (the replay steps are a chain: step 0, 1, 2)
    seen: dict[int, tuple[list[Any], list[list[int]]]] = {}
    collate = ClassificationData.collate

    def recording(self: ClassificationData, indices: Any) -> Any:
        seen.setdefault(id(self), (list(self.examples), []))[1].append(list(indices))
        return collate(self, indices)

    monkeypatch.setattr(ClassificationData, "collate", recording)
    run = tmp_path / "run"
    assert main(["run", CONFIG, *ARMS, "--run-dir", str(run)]) == 0
    stages = run / "stages"
    order = json.loads((stages / "replay_resource_2" / "matrix.json").read_text())["order"]
    own: dict[str, list[Any]] = {}
    steps = list(seen.values())
    assert len(steps) == len(order)
    for k, lang in enumerate(order):
        summary = json.loads((stages / f"replay_resource_{k}" / "step_summary.json").read_text())
        examples, batches = steps[k]
        n_replayed = sum(summary.get("replayed", {}).values())
        n_own = len(examples) - n_replayed
        own[lang] = examples[:n_own]
        assert (stages / f"replay_resource_{k}" / BUFFER_FILE).is_file()
        if k == 0:  # nothing learned before: VANILLA's first step
            assert summary["replayed"] == {}
            continue
        assert n_replayed == replay_count(n_own, 0.25)
        assert set(summary["replayed"]) <= set(order[:k])  # only languages learned before
        # each replayed example is one of an earlier language's own training examples
        assert all(any(e in own[x] for x in order[:k]) for e in examples[n_own:])
        assert not any(e in own[order[k - 1]] for e in examples[:n_own])
        # and the loop's batches really hold them
        trained = [i for b in batches for i in b]
        assert sum(i >= n_own for i in trained) >= n_replayed
    final = json.loads((stages / "replay_resource_2" / "step_summary.json").read_text())
    assert set(final["replayed"]) == set(order[:2])  # the reservoir holds both earlier ones
    # REPLAY's first step is VANILLA's: its scores are the golden VANILLA ones of step 0
    want = json.loads((GOLDEN / "lifelong_smoke.json").read_text(encoding="utf-8"))
    got = score_table(run)
    first = {k: v for k, v in got.items() if json.loads(k)[0] == "REPLAY" and json.loads(k)[7] == 0}
    as_vanilla = {json.dumps(["VANILLA", *json.loads(k)[1:]]): v for k, v in first.items()}
    assert len(first) == 3 and compare(want, as_vanilla, subset=True) == []
    assert "| REPLAY |" in (run / "report.md").read_text()
