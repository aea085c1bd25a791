"""What changed between two runs: the system a target reports, summarised over its answers, and the keys compared."""

from __future__ import annotations

import pytest

from gate.core.changes import change_text, changes, facts, read_system, summarise_system


def test_the_summary_keeps_the_most_common_value_and_counts_where_answers_disagree() -> None:
    systems = [{"model": "a", "documents": 10}, {"model": "b", "documents": 10}, {"model": "b", "documents": 10}, None,
               {"documents": 10}]
    info = summarise_system(systems)
    assert info is not None
    assert info["values"] == {"model": "b", "documents": 10}
    assert info["counts"] == {"model": {"b": 2, "a": 1, "(not given)": 2}, "documents": {"10": 4, "(not given)": 1}}
    assert summarise_system([None, None]) is None
    assert "counts" not in (summarise_system([{"m": 1}, {"m": 1}]) or {})


def test_a_tie_keeps_the_value_seen_first() -> None:
    info = summarise_system([{"model": "x"}, {"model": "y"}])
    assert info is not None and info["values"]["model"] == "x"


@pytest.mark.parametrize(("value", "said"), [
    ([1], "must be an object"), ({"m": [1]}, "system.m must be a string or a number"), ({"m": True}, "string or a number"),
    ({"m": "x" * 201}, "more than 200"), ({"": 1}, "keys must be 1 to 100"), ({f"k{i}": 1 for i in range(51)}, "more than 50"),
    ({"m": float("nan")}, "string or a number"), ({"m": 1e308}, "out of range"),
])
def test_a_system_object_of_the_wrong_shape_is_refused_naming_the_key(value, said) -> None:
    with pytest.raises(ValueError, match=said):
        read_system(value)


def _facts(system=None, commit="c1", version="1.0", golden="sha256:" + "a" * 64):
    return facts({"golden_set": golden, "spec": "sha256:" + "b" * 64, "k": "k=10"}, {}, commit=commit, tool_version=version,
                 system={"values": system} if system is not None else None)


def test_changes_name_each_key_that_moved_in_a_fixed_order() -> None:
    before = _facts({"model": "gpt-4-0613", "documents": 1040, "gone": "x"})
    after = _facts({"model": "gpt-4-0125", "documents": 1240, "new": 1}, commit="c2", golden="sha256:" + "c" * 64)
    found = changes(before, after)
    assert [c["key"] for c in found] == ["golden_set", "commit", "system.model", "system.documents", "system.new", "system.gone"]
    assert change_text(found[3]) == "system.documents: 1,040 → 1,240"
    assert change_text(found[4]) == "system.new: (none) → 1" and change_text(found[5]) == "system.gone: x → (none)"
    assert found[0]["before"] == "sha256:aaaaaaaaaaaa"  # a fingerprint shortened to what a reader compares


def test_what_one_side_does_not_know_is_no_change() -> None:
    assert changes(_facts(None, commit=None, version=None), _facts({"model": "m"}, commit="c9", version="2.0")) == []
    assert changes(_facts({"model": "m"}), _facts({"model": "m"})) == []
    assert changes(_facts({"model": "m"}), _facts(None)) == []  # this run's answers said nothing of the system
