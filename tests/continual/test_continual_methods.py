import pytest

from polymnesia.continual.methods import METHODS, arm_label, get_method, table1_params
from polymnesia.errors import PolymnesiaError


def test_five_methods_with_equations() -> None:
    paper = {"multi", "mono", "vanilla", "shared_lora", "nonshared_lora"}
    assert set(METHODS.names()) == paper | {
        "l2sp",
        "ewc",
        "lwf",
        "merge",
        "merge_ta",
        "merge_ties",
        "replay",
    }  # + the baselines (issue 27)
    assert all(get_method(m).baseline is None for m in paper)
    assert get_method("shared_lora").equation == "eq. 5"
    assert get_method("nonshared_lora").schedule == "independent"


def test_unknown_method_is_one_line() -> None:
    with pytest.raises(PolymnesiaError) as e:
        get_method("vanila")
    assert "\n" not in str(e.value) and "vanilla" in str(e.value)


def test_labels_and_table1_counts() -> None:
    assert arm_label("multi", None) == "MULTI" and arm_label("multi", 8) == "MULTI r=8"
    assert arm_label("shared_lora", 4) == "SHARED LoRA r=4"
    # Table 1 of 004: MONO = 52 x 278.04M; NON-SHARED LoRA multiplies the adapter by the languages
    assert table1_params("mono", 278_040_000, 52) == 14_458_080_000
    assert table1_params("nonshared_lora", 100, 16) == 1600
    assert table1_params("shared_lora", 100, 16) == 100
    assert table1_params("vanilla", 100, 16) == 100
