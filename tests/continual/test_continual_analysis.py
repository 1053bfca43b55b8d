import math

import numpy as np

from polymnesia.continual.analysis import group_means, group_of, hop_average, ranking


def test_groups_from_language_table() -> None:
    assert group_of("en", "script") == "Latin" and group_of("ru", "script") == "non-Latin"
    assert group_of("zh", "family") == "Sino-Tibetan"
    assert group_of("en", "resource") == "High"


def test_group_means_skip_nan() -> None:
    got = group_means({"en": 0.5, "fr": 0.7, "ru": 0.1, "ar": math.nan}, "script")
    assert got == {"Latin": 0.6, "non-Latin": 0.1}


def test_hop_average_and_ranking() -> None:
    avg = hop_average(
        {"a": np.array([1.0, np.nan, 3.0]), "b": np.array([np.nan]), "c": np.array([5.0])}
    )
    assert avg["a"] == 2.0 and math.isnan(avg["b"])
    assert [k for k, _ in ranking(avg)] == ["c", "a", "b"]
