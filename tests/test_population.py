import pytest

from common.errors import DataError
from sources.population import Population


def test_quick_population_is_4_sh_and_4_mh_of_the_6k_history_in_released_order(dataset):
    chosen = Population("quick", per_cell=4, lengths=["6k"]).select(dataset.questions)
    assert [q.qid for q in chosen] == [f"factconsolidation_{h}_6k_no{i}" for h in ("mh", "sh") for i in range(4)]


def test_per_cell_balances_every_cell_and_all_keeps_everything(dataset):
    chosen = Population("p", per_cell=3).select(dataset.questions)
    assert len(chosen) == 24 and len({(q.hop, q.length) for q in chosen}) == 8
    assert Population().select(dataset.questions) == list(dataset.questions)


def test_bad_population_settings_are_named(dataset):
    with pytest.raises(DataError, match=r"population.lengths = .*\['7k'\] not among"):
        Population("x", lengths=["7k"]).select(dataset.questions)
    with pytest.raises(ValueError, match="per_cell must be >= 1"):
        Population("x", per_cell=0)
