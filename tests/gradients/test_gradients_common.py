"""Behaviour every combiner shares: validation, T = 1, all-zero rows, registry."""

from __future__ import annotations

import pytest
import torch

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.gradients import COMBINERS, get_combiner

NAMES = ["gradvac", "lf_mlf", "mgda", "pcgrad", "uniform"]


def test_registry_lists_every_combiner_with_a_description():
    assert COMBINERS.names() == NAMES
    assert all(entry.description for entry in COMBINERS)


@pytest.mark.parametrize("name", NAMES)
def test_single_language_returns_its_gradient(name):
    combine = get_combiner(name)
    g = torch.tensor([[0.3, -2.0, 5.0]])
    assert torch.equal(combine(g), g[0])
    assert combine.weights is not None and combine.weights.tolist() == [1.0]


@pytest.mark.parametrize("name", NAMES)
def test_all_zero_gradients_give_zero_and_uniform_weights(name):
    combine = get_combiner(name)
    out = combine(torch.zeros(3, 4))
    assert torch.equal(out, torch.zeros(4))
    assert torch.allclose(combine.weights, torch.full((3,), 1 / 3, dtype=torch.float64))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", NAMES)
def test_one_zero_row_among_others_is_finite(name):
    g = torch.tensor([[0.0, 0.0], [1.0, 0.0], [-1.0, 1.0]])
    out = get_combiner(name)(g)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", NAMES)
def test_nan_row_is_named_with_its_language(name):
    g = torch.ones(3, 4)
    g[2, 1] = float("nan")
    with pytest.raises(PolymnesiaError, match=r"row 2 \(language 'fr'\)"):
        get_combiner(name)(g, languages=["en", "de", "fr"])
    g[2, 1] = float("inf")
    with pytest.raises(PolymnesiaError, match="row 2 has NaN or infinite"):
        get_combiner(name)(g)


@pytest.mark.parametrize("bad", [torch.ones(4), torch.ones(2, 2, 2), torch.ones(0, 3)])
def test_grads_must_be_a_nonempty_matrix(bad):
    with pytest.raises(PolymnesiaError, match="grads"):
        get_combiner("uniform")(bad)


def test_language_count_must_match_rows():
    with pytest.raises(PolymnesiaError, match="2 languages but grads has 3 rows"):
        get_combiner("mgda")(torch.ones(3, 2), languages=["en", "de"])


def test_integer_grads_are_rejected():
    with pytest.raises(PolymnesiaError, match="floating point"):
        get_combiner("uniform")(torch.ones(2, 2, dtype=torch.int64))


def test_unknown_name_and_option_are_one_line_errors():
    with pytest.raises(PolymnesiaError, match="did you mean 'pcgrad'"):
        get_combiner("pcgard")
    with pytest.raises(ConfigError, match="no option 'bta'; accepted: beta, granularity"):
        get_combiner("gradvac", bta=0.1)
    with pytest.raises(ConfigError, match="reduction"):
        get_combiner("pcgrad", reduction="max")


@pytest.mark.parametrize("name", NAMES)
def test_load_state_dict_rejects_foreign_keys(name):
    combine = get_combiner(name)
    with pytest.raises(ConfigError, match="state has keys"):
        combine.load_state_dict({"unexpected": 1})


@pytest.mark.parametrize("name", NAMES)
def test_output_keeps_dtype_and_shape(name):
    g = torch.randn(4, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    out = get_combiner(name)(g)
    assert out.shape == (7,) and out.dtype == torch.float64
