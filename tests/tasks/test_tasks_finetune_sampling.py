"""The fine-tune stage's seeded sample by verse id: aligned across languages, spread over books."""

from __future__ import annotations

from polymnesia.stages.finetune import sample_by_id


def test_same_ids_in_every_language_and_not_the_first_ones() -> None:
    en = [{"id": f"{b}.1.{v}", "lang": "en"} for b in range(1, 67) for v in range(1, 4)]
    de = [{"id": r["id"], "lang": "de"} for r in en if r["id"] != "1.1.1"]  # one verse missing
    a, b = sample_by_id(en, 20, seed=0), sample_by_id(de, 20, seed=0)
    assert len(a) == 20 and len({r["id"] for r in a}) == 20
    assert {r["id"] for r in a} - {"1.1.1"} <= {r["id"] for r in sample_by_id(de, 21, seed=0)}
    assert len({r["id"].split(".")[0] for r in a}) > 10  # many books, not Genesis only
    assert sample_by_id(en, 20, seed=1) != a and sample_by_id(en, None, seed=0) == en
    assert len(b) == 20
