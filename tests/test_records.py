import pytest

from cmc.records import History, Record
from cmc.render import render
from common.errors import DataError


def test_parse_keeps_header_serials_and_text():
    history = History.parse("h", "Here is a list of facts:\n0. A is B.\n7. C. D.\n")
    assert history.header == "Here is a list of facts:"
    assert [(r.pos, r.text) for r in history] == [(0, "A is B."), (7, "C. D.")]


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ("H\n0. a\n0. b\n", "duplicate serial number 0"),
        ("H\n0. a\n5. b\n3. c\n", "decreasing serial number 3"),
        ("H\n0. a\nno number here\n", "line 3 is not a numbered record"),
        ("H\n0. a\n1.missing space\n", "line 3 is not a numbered record"),
        ("", "empty context"),
    ],
)
def test_malformed_histories_are_rejected_with_the_problem_named(context, message):
    with pytest.raises(DataError, match=message):
        History.parse("h", context, source="fixture.txt")


def test_unknown_record_position_is_a_clear_error():
    history = History("h", "H", (Record(0, "a"),))
    with pytest.raises(DataError, match="has no record 3"):
        history.record(3)


def test_rendering_every_real_record_reproduces_each_context(dataset, cfg):
    import pyarrow.parquet as pq

    contexts = {row["metadata"]["source"].split("_")[-1]: row["context"]
                for row in pq.read_table(cfg.dataset.path).to_pylist()}
    for history in dataset.histories.values():
        rendered = render(history, (r.pos for r in history), budget_chars=None)
        assert rendered.text == contexts[history.history_id.split("_")[-1]]
        assert not rendered.truncated
