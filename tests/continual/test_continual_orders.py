import math

import pytest

from polymnesia.continual.orders import (
    default_destructive_count,
    destructive_last_order,
    destructive_moved_last_order,
    joshi_sizes,
    resource_order,
    shuffled_order,
    validate_order,
)
from polymnesia.errors import ConfigError


def test_validate_order_accepts_a_permutation() -> None:
    assert validate_order(["b", "a", "c"], ["a", "b", "c"]) == ["b", "a", "c"]


@pytest.mark.parametrize(
    ("order", "needle"),
    [
        (["a", "a", "b"], "repeats a"),
        (["a", "b"], "misses c"),
        (["a", "b", "c", "d"], "has d which is not a task language"),
    ],
)
def test_validate_order_errors_are_one_line(order: list[str], needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        validate_order(order, ["a", "b", "c"], "order 'x'")
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_resource_order_sorts_descending_with_ties_by_code() -> None:
    assert resource_order(["b", "a", "c", "d"], {"a": 1, "b": 5, "c": 1}) == ["b", "a", "c", "d"]


def test_joshi_sizes_from_language_table() -> None:
    sizes = joshi_sizes(["en", "ru", "sw"])
    assert sizes["en"] == 5 and sizes["ru"] == 4 and sizes["sw"] < 4
    assert resource_order(["sw", "ru", "en"], sizes) == ["en", "ru", "sw"]


def test_shuffle_is_seeded_and_a_permutation() -> None:
    langs = [f"l{i}" for i in range(10)]
    a, b, c = shuffled_order(langs, 1), shuffled_order(langs, 1), shuffled_order(langs, 2)
    assert a == b and a != c and sorted(a) == langs


def test_destructive_last_puts_largest_drop_last_and_nan_as_zero() -> None:
    shifts = {"a": 0.10, "b": -0.05, "c": math.nan, "d": 0.02}
    assert destructive_last_order(shifts, ["a", "b", "c", "d"]) == ["b", "c", "d", "a"]


def test_destructive_moved_last_keeps_the_shuffle_and_moves_the_top_shifts() -> None:
    langs = [f"l{i}" for i in range(8)]
    shifts = {"l0": 0.3, "l1": -0.1, "l2": 0.5, "l3": math.nan, "l4": 0.1}
    order = destructive_moved_last_order(shifts, langs, seed=3, count=2)
    rest = [lang for lang in shuffled_order(langs, 3) if lang not in ("l0", "l2")]
    assert order == [*rest, "l0", "l2"]  # l2 (0.5) most destructive, learned last
    assert destructive_moved_last_order(shifts, langs, seed=3, count=0) == shuffled_order(langs, 3)


def test_destructive_moved_last_default_count_and_bad_count() -> None:
    langs = [f"l{i}" for i in range(52)]
    assert default_destructive_count(52) == 5 and default_destructive_count(3) == 1
    shifts = {lang: float(i) for i, lang in enumerate(langs)}
    order = destructive_moved_last_order(shifts, langs, seed=0)
    assert order[-5:] == ["l47", "l48", "l49", "l50", "l51"] and sorted(order) == sorted(langs)
    with pytest.raises(ConfigError, match="between 0 and the number of languages"):
        destructive_moved_last_order(shifts, langs, seed=0, count=53)
