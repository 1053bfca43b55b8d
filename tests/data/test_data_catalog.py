import pytest

from polymnesia.data.catalog import describe_source, fetch_source, load_splits, split_caps
from polymnesia.data.sources import get_source
from polymnesia.errors import DataError


def test_load_splits_aligned_and_deterministic():
    src = get_source("udhr")
    a = load_splits(src, ["en", "fr", "th"], seed=1)
    b = load_splits(src, ["en", "fr", "th"], seed=1)
    assert a == b
    for split in ("train", "validation", "test"):
        groups = [{r.meta["split_group"] for r in a[lang][split]} for lang in ("en", "fr", "th")]
        assert groups[0] == groups[1] == groups[2]
    assert sum(len(v) for v in a["en"].values()) == len(list(src.records("en")))


def test_max_per_lang_caps_by_fractions():
    assert split_caps(10, (0.8, 0.1, 0.1)) == {"train": 8, "validation": 1, "test": 1}
    assert split_caps(3, (0.5, 0.5, 0.0)) == {"train": 2, "validation": 1, "test": 0}
    src = get_source("udhr")
    full = load_splits(src, ["en"], seed=0)["en"]
    capped = load_splits(src, ["en"], seed=0, max_per_lang={"en": 10})["en"]
    assert {k: len(v) for k, v in capped.items()} == {"train": 8, "validation": 1, "test": 1}
    assert capped["train"] == full["train"][:8]
    with pytest.raises(DataError, match="max_per_lang names 'fr'"):
        load_splits(src, ["en"], max_per_lang={"fr": 3})
    with pytest.raises(DataError, match="non-negative integer"):
        load_splits(src, ["en"], max_per_lang={"en": -1})


def test_missing_language_lists_what_the_source_has():
    with pytest.raises(
        DataError, match="source 'udhr' has no language 'xx'; it has af, am, ar"
    ) as exc:
        load_splits(get_source("udhr"), ["en", "xx"])
    assert "\n" not in str(exc.value)


def test_describe_and_fetch_udhr():
    info = describe_source("udhr", languages=["en", "de"])
    assert info["languages"] == ["de", "en"]
    en = info["per_language"]["en"]
    assert en["records"] == sum(en["splits"].values()) == 51
    assert "free to reproduce" in info["licence"]
    summary = fetch_source("udhr", languages=["en"])
    assert summary.startswith("Source 'udhr' is ready: 1 languages (en).")


def test_local_source_through_catalog(tmp_path):
    (tmp_path / "en.txt").write_text("\n".join(f"line {i}" for i in range(50)), encoding="utf-8")
    (tmp_path / "fr.txt").write_text("\n".join(f"ligne {i}" for i in range(50)), encoding="utf-8")
    out = load_splits(
        get_source("local", path=str(tmp_path)), ["en", "fr"], (0.6, 0.2, 0.2), seed=5
    )
    assert [r.id for r in out["en"]["test"]] == [r.id for r in out["fr"]["test"]]


def test_hf_name_option_passes_through(monkeypatch):
    import datasets

    monkeypatch.setattr(
        datasets,
        "load_dataset",
        lambda *a, **k: datasets.Dataset.from_list([{"lang": "en", "text": "hi"}]),
    )
    info = describe_source("hf", name="org/x", lang_field="lang")
    assert info["per_language"]["en"]["records"] == 1 and info["details"]["dataset"] == "org/x"
