import pytest

from polymnesia.data.records import TextRecord
from polymnesia.data.splits import assign_split, check_fractions, split_records, unit_hash
from polymnesia.errors import ConfigError


def test_same_id_same_split_in_every_language():
    ids = [f"40.{c}.{v}" for c in range(1, 20) for v in range(1, 20)]
    by_lang = {
        lang: split_records([TextRecord(i, lang, f"{lang} {i}") for i in ids], seed=3)
        for lang in ("en", "fr", "ja")
    }
    for split in ("train", "validation", "test"):
        id_sets = [{r.id for r in by_lang[lang][split]} for lang in by_lang]
        assert id_sets[0] == id_sets[1] == id_sets[2]
    assert sum(len(v) for v in by_lang["en"].values()) == len(ids)


def test_proportions_close_to_fractions_on_10k_ids():
    counts = {"train": 0, "validation": 0, "test": 0}
    for i in range(10_000):
        counts[assign_split(f"id{i}", (0.7, 0.2, 0.1), seed=0)] += 1
    assert abs(counts["train"] / 10_000 - 0.7) < 0.02
    assert abs(counts["validation"] / 10_000 - 0.2) < 0.02
    assert abs(counts["test"] / 10_000 - 0.1) < 0.02


def test_deterministic_and_seed_dependent():
    a = [assign_split(f"x{i}") for i in range(200)]
    assert a == [assign_split(f"x{i}") for i in range(200)]
    assert a != [assign_split(f"x{i}", seed=1) for i in range(200)]


def test_unit_hash_golden():
    import hashlib

    expected = int.from_bytes(hashlib.sha256(b"7:a1.p1").digest()[:8], "big") / 2.0**64
    assert unit_hash("a1.p1", 7) == expected


def test_split_group_keeps_paragraphs_of_one_article_together():
    recs = [
        TextRecord(f"a{k}.p{p}", "en", "t", meta={"split_group": f"a{k}"})
        for k in range(1, 31)
        for p in (1, 2, 3)
    ]
    splits = split_records(recs, seed=0)
    for split, rs in splits.items():
        for r in rs:
            assert assign_split(r.meta["split_group"]) == split


def test_degenerate_fractions():
    assert {assign_split(f"i{i}", (1.0, 0.0, 0.0)) for i in range(100)} == {"train"}
    assert {assign_split(f"i{i}", (0, 0, 1)) for i in range(100)} == {"test"}


@pytest.mark.parametrize(
    "bad", [(0.5, 0.5), (0.8, 0.1, 0.2), (1.2, -0.1, -0.1), (0.5, float("nan"), 0.5)]
)
def test_bad_fractions_one_line(bad):
    with pytest.raises(ConfigError, match="summing to 1") as exc:
        check_fractions(bad)
    assert "\n" not in str(exc.value)
