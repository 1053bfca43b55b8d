import math

import pytest

from polymnesia.continual.orders import (
    destructive_last_order,
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
