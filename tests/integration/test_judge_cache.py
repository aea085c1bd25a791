"""The judge score cache on real SQLite files, written by real concurrent processes."""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from gate.core.errors import EXIT_INPUT, InputError
from gate.judges import JudgeInput
from gate.judges.cache import CacheStats, JudgeCache, NullCache
from gate.judges.keys import ScoreSource, cache_key, text_cache_key

SPAWN = multiprocessing.get_context("spawn")  # children build their own connections from scratch
JOIN_TIMEOUT_S = 120  # a hang guard only: the tests assert results, never durations

BASE = {
    "engine": "ragas",
    "engine_version": "0.4.3",
    "metric": "faithfulness",
    "model": "gpt-4o-2024-11-20",
    "temperature": 0.0,
    "prompt_fingerprint": "prompt v1",
    "item": JudgeInput(question="What is the capital?", answer="Paris", contexts=("Paris is the capital.", "Lyon is big."), ground_truth="Paris"),
}


def _raw(path: Path) -> contextlib.closing[sqlite3.Connection]:
    """A plain sqlite3 connection that is closed (not just committed) at the end of the block."""
    return contextlib.closing(sqlite3.connect(path, isolation_level=None))


def _key(**changes) -> str:
    fields = {**BASE, **changes}
    item = fields.pop("item")
    return cache_key(ScoreSource(**fields), item)


def _item(**changes) -> JudgeInput:
    return dataclasses.replace(BASE["item"], **changes)


# --- keys ---

CHANGES = {
    "engine": {"engine": "deepeval"},
    "engine_version": {"engine_version": "0.4.4"},
    "metric": {"metric": "answer_relevancy"},
    "model": {"model": "gpt-4o-2024-08-06"},
    "model-none": {"model": None},
    "temperature": {"temperature": 0.7},
    "temperature-none": {"temperature": None},
    "prompt_fingerprint": {"prompt_fingerprint": "prompt v2"},
    "question": {"item": _item(question="What is the capital of France?")},
    "answer": {"item": _item(answer="Paris.")},
    "answer-whitespace": {"item": _item(answer="Paris ")},
    "contexts-order": {"item": _item(contexts=("Lyon is big.", "Paris is the capital."))},
    "contexts-content": {"item": _item(contexts=("Paris is the capital.", "Lyon is large."))},
    "contexts-fewer": {"item": _item(contexts=("Paris is the capital.",))},
    "contexts-split-differently": {"item": _item(contexts=("Paris is the capital.Lyon is big.",))},
    "contexts-none": {"item": _item(contexts=())},
    "reference": {"item": _item(ground_truth="Paris, France")},
    "reference-none": {"item": _item(ground_truth=None)},
    "reference-empty": {"item": _item(ground_truth="")},
    "boundary-question-answer": {"item": _item(question="What is the capital?P", answer="aris")},
}


@pytest.mark.parametrize("changes", CHANGES.values(), ids=CHANGES.keys())
def test_key_changes_when_any_field_changes(changes):
    assert _key(**changes) != _key()


def test_every_field_is_covered_by_a_change():
    changed = {name for changes in CHANGES.values() for name in changes}
    items = [change["item"] for change in CHANGES.values() if "item" in change]
    item_fields = {f.name for item in items for f in dataclasses.fields(JudgeInput) if getattr(item, f.name) != getattr(BASE["item"], f.name)}
    assert changed == set(BASE)
    assert item_fields == {f.name for f in dataclasses.fields(JudgeInput)}


def test_reference_none_and_empty_differ():
    assert _key(item=_item(ground_truth=None)) != _key(item=_item(ground_truth=""))


def test_key_is_stable_when_nothing_changes():
    assert _key() == _key()
    assert _key(item=JudgeInput(**dataclasses.asdict(BASE["item"]))) == _key()  # an equal, distinct object
    assert len(_key()) == 64 and int(_key(), 16) >= 0


@pytest.mark.parametrize("temperature", [0, 0.0, -0.0])
def test_temperature_zero_int_and_float_give_the_same_key(temperature):
    assert _key(temperature=temperature) == _key(temperature=0.0)


def test_temperature_must_be_finite():
    with pytest.raises(ValueError, match="temperature"):
        _key(temperature=float("nan"))


def test_key_is_the_same_for_both_caches(tmp_path):
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        source = ScoreSource(**{k: v for k, v in BASE.items() if k != "item"})
        assert cache.key(source, BASE["item"]) == NullCache().key(source, BASE["item"]) == _key()


# --- values ---


def test_put_get_and_stats(tmp_path):
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        cache.put("k1", 0.25, {"engine": "ragas"})
        cache.put("k2", 1, {"engine": "ragas"})
        assert cache.get("k1") == 0.25
        assert cache.get("k2") == 1.0 and isinstance(cache.get("k2"), float)
        assert cache.get("missing") is None
        assert cache.get_many(["k1", "missing", "k2", "k1", "other"]) == {"k1": 0.25, "k2": 1.0}
        assert cache.stats() == CacheStats(entries=2, hits=5, misses=3)


def test_put_replaces_an_existing_key(tmp_path):
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        cache.put("k", 0.1, {})
        cache.put("k", 0.9, {})
        assert cache.get("k") == 0.9
        assert cache.stats().entries == 1


@pytest.mark.parametrize("value", [float("nan"), -0.01, 1.01, float("inf")])
def test_invalid_values_are_refused_and_not_stored(tmp_path, value):
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        with pytest.raises(ValueError):
            cache.put("k", value, {})
        assert cache.get("k") is None
        assert cache.stats().entries == 0


def test_meta_and_created_at_are_stored_for_inspection(tmp_path):
    path = tmp_path / "c.sqlite"
    with JudgeCache(path) as cache:
        cache.put("k", 0.5, {"engine": "ragas", "metric": "faithfulness", "model": "gpt-4o-2024-11-20"})
    with _raw(path) as conn:
        created_at, meta = conn.execute("SELECT created_at, meta FROM scores WHERE key = 'k'").fetchone()
    assert created_at[:2] == "20" and created_at.endswith("+00:00")
    assert '"metric": "faithfulness"' in meta and '"model": "gpt-4o-2024-11-20"' in meta


def test_get_many_beyond_the_sqlite_variable_limit(tmp_path):
    limit = sqlite3.connect(":memory:").getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        stored = {f"k{i}": i / 10 for i in range(0, 10)}
        for key, value in stored.items():
            cache.put(key, value, {})
        keys = [f"k{i}" for i in range(limit + 10)]
        assert cache.get_many(keys) == stored
        assert cache.stats().misses == len(keys) - len(stored)


def test_file_is_in_wal_mode_and_parent_folders_are_created(tmp_path):
    path = tmp_path / "a" / "b" / "judge-cache.sqlite"
    with JudgeCache(path) as cache:
        cache.put("k", 0.5, {})
        with _raw(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert path.is_file()
    assert not path.with_name(path.name + "-wal").exists()  # closing folded the WAL back in


# --- several processes ---


def _write_keys(path: str, worker: int, count: int, barrier) -> None:
    try:
        barrier.wait(JOIN_TIMEOUT_S)
        with JudgeCache(Path(path)) as cache:
            barrier.wait(JOIN_TIMEOUT_S)
            for i in range(count):
                cache.put(f"w{worker}-{i}", (worker * count + i) / 10_000, {"worker": worker})
    except BaseException:
        barrier.abort()  # a failed worker releases the others instead of leaving them waiting
        raise


def _read_keys(path: str, keys: list[str], queue) -> None:
    with JudgeCache(Path(path)) as cache:
        queue.put(cache.get_many(keys))


def _run(processes) -> None:
    for process in processes:
        process.start()
    for process in processes:
        process.join(JOIN_TIMEOUT_S)
    hung = [p for p in processes if p.is_alive()]
    for process in hung:
        process.kill()
        process.join()
    assert hung == []
    assert [p.exitcode for p in processes] == [0] * len(processes)


def test_another_process_sees_writes_both_ways(tmp_path):
    path = tmp_path / "c.sqlite"
    with JudgeCache(path) as ours:
        ours.put("parent", 0.75, {})
        barrier = SPAWN.Barrier(1)  # held here: Process.start() drops its args before the child unpickles them
        _run([SPAWN.Process(target=_write_keys, args=(str(path), 7, 3, barrier))])
        # the connection opened before the other process wrote sees its rows
        assert ours.get_many(["w7-0", "w7-1", "w7-2"]) == {"w7-0": 0.0021, "w7-1": 0.0022, "w7-2": 0.0023}
        queue = SPAWN.Queue()
        _run([SPAWN.Process(target=_read_keys, args=(str(path), ["parent", "w7-2", "nope"], queue))])
        assert queue.get(timeout=JOIN_TIMEOUT_S) == {"parent": 0.75, "w7-2": 0.0023}
    with JudgeCache(path) as fresh:
        assert fresh.stats().entries == 4


def test_eight_processes_writing_at_once(tmp_path):
    path = tmp_path / "shared" / "cache.sqlite"
    workers, per_worker = 8, 200
    barrier = SPAWN.Barrier(workers)  # all open the new file together, then all write together
    _run([SPAWN.Process(target=_write_keys, args=(str(path), w, per_worker, barrier)) for w in range(workers)])
    expected = {f"w{w}-{i}": (w * per_worker + i) / 10_000 for w in range(workers) for i in range(per_worker)}
    with JudgeCache(path) as cache:
        assert cache.stats().entries == 1600
        assert cache.get_many(expected) == expected
    with _raw(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(1,)]


# --- files that are not our cache ---


def test_garbage_file_is_an_input_error_naming_it(tmp_path):
    path = tmp_path / "judge-cache.sqlite"
    garbage = b"this is not a database\x00\xff\xfe" * 200
    path.write_bytes(garbage)
    with pytest.raises(InputError) as caught:
        JudgeCache(path)
    assert str(path) in str(caught.value)
    assert "delete" in str(caught.value)
    assert caught.value.exit_code == EXIT_INPUT
    assert path.read_bytes() == garbage  # left alone for the user to look at


def test_corrupt_pages_are_an_input_error(tmp_path):
    path = tmp_path / "c.sqlite"
    with JudgeCache(path) as cache:
        for i in range(2000):
            cache.put(f"key-{i:05d}", 0.5, {"pad": "x" * 50})
    data = bytearray(path.read_bytes())
    assert len(data) > 3 * 4096
    data[4096:] = b"\xa5" * (len(data) - 4096)  # keep the header page, scramble every other page
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="delete the file") as caught:
        with JudgeCache(path) as cache:
            cache.get_many([f"key-{i:05d}" for i in range(2000)])
            cache.stats()
    assert str(path) in str(caught.value)


def test_a_foreign_sqlite_database_is_an_input_error(tmp_path):
    path = tmp_path / "app.db"
    with _raw(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(InputError, match="not a rag-gate judge cache") as caught:
        JudgeCache(path)
    assert str(path) in str(caught.value)


def test_another_schema_version_is_detected(tmp_path):
    path = tmp_path / "c.sqlite"
    JudgeCache(path).close()
    with _raw(path) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    with pytest.raises(InputError, match="version 99") as caught:
        JudgeCache(path)
    assert str(path) in str(caught.value) and "delete" in str(caught.value)


def test_a_folder_at_the_path_is_an_input_error(tmp_path):
    (tmp_path / "cache.sqlite").mkdir()
    with pytest.raises(InputError) as caught:
        JudgeCache(tmp_path / "cache.sqlite")
    assert str(tmp_path / "cache.sqlite") in str(caught.value)


# --- --no-cache ---


def test_null_cache_never_stores(tmp_path):
    cache = NullCache()
    cache.put("k", 0.5, {})
    assert cache.get("k") is None
    assert cache.get_many(["k", "j"]) == {}
    assert cache.stats() == CacheStats(entries=0, hits=0, misses=3)
    with pytest.raises(ValueError):
        cache.put("k", float("nan"), {})
    assert list(tmp_path.iterdir()) == []


# --- judge-written texts (distractor passages, refusal verdicts) ---

TEXT_BASE = {
    "kind": "distractor",
    "prompt_fingerprint": "distractor v1",
    "model": "gpt-4o-2024-11-20",
    "temperature": 0.0,
    "payload": {"question": "What is the capital?", "ground_truth": "Paris", "context": "Paris is the capital."},
}


def _text_key(**changes) -> str:
    return text_cache_key(**{**TEXT_BASE, **changes})


@pytest.mark.parametrize("changes", [
    {"kind": "refusal"},
    {"prompt_fingerprint": "distractor v2"},
    {"model": "gpt-4o-2024-08-06"},
    {"temperature": 0.7},
    {"payload": {**TEXT_BASE["payload"], "ground_truth": "Lyon"}},
    {"payload": {**TEXT_BASE["payload"], "context": None}},
    {"payload": {**TEXT_BASE["payload"], "seed": 1}},
], ids=lambda c: next(iter(c)))
def test_text_key_changes_when_any_input_changes(changes):
    assert _text_key(**changes) != _text_key()


def test_text_key_is_stable_and_ignores_payload_key_order():
    reordered = dict(reversed(list(TEXT_BASE["payload"].items())))
    assert _text_key(payload=reordered) == _text_key() == _text_key(temperature=0)
    assert len(_text_key()) == 64
    with pytest.raises(ValueError):
        _text_key(temperature=float("inf"))


def test_text_round_trip_and_stats(tmp_path):
    path = tmp_path / "c.sqlite"
    passage = "Paris is not the capital; the government sits in Lyon since 1999. ünïcode stays."
    with JudgeCache(path) as cache:
        key = cache.key_text(**TEXT_BASE)
        assert key == NullCache().key_text(**TEXT_BASE) == _text_key()
        assert cache.get_text(key) is None
        cache.put_text(key, passage, {"kind": "distractor", "model": "gpt-4o-2024-11-20"})
        assert cache.get_text(key) == passage
        assert cache.text_stats() == CacheStats(entries=1, hits=1, misses=1)
    with JudgeCache(path) as again:  # it is on disk, with its meta for inspection
        assert again.get_text(key) == passage
    with _raw(path) as conn:
        (meta,) = conn.execute("SELECT meta FROM texts WHERE key = ?", (key,)).fetchone()
    assert '"kind": "distractor"' in meta


def test_texts_and_scores_are_separate_namespaces(tmp_path):
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        cache.put("same-key", 0.25, {})
        cache.put_text("same-key", "a passage", {})
        assert cache.get("same-key") == 0.25 and cache.get_text("same-key") == "a passage"
        cache.put_text("text-only", "another passage", {})
        assert cache.get("text-only") is None and cache.get_many(["text-only"]) == {}
        assert cache.stats().entries == 1 and cache.text_stats().entries == 2
    assert _text_key() != _key()  # and the two key functions never agree on the same inputs


@pytest.mark.parametrize("text", ["", "   \n", None, 3])
def test_empty_or_non_string_texts_are_refused_and_not_stored(tmp_path, text):
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        with pytest.raises((ValueError, TypeError)):
            cache.put_text("k", text, {})
        assert cache.get_text("k") is None
        assert cache.text_stats().entries == 0


def test_a_score_only_cache_file_of_this_version_opens_and_keeps_its_scores(tmp_path):
    path = tmp_path / "c.sqlite"
    with JudgeCache(path) as cache:
        cache.put("k", 0.5, {})
    with _raw(path) as conn:  # what a rag-gate from before the text table wrote
        conn.execute("DROP TABLE texts")
    with JudgeCache(path) as cache:
        assert cache.get("k") == 0.5
        cache.put_text("t", "a passage", {})
        assert cache.get_text("t") == "a passage"
    with _raw(path) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {"schema_version", "scores", "texts"}
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(1,)]


def test_null_cache_stores_no_text(tmp_path):
    cache = NullCache()
    cache.put_text("k", "a passage", {})
    assert cache.get_text("k") is None
    assert cache.text_stats() == CacheStats(entries=0, hits=0, misses=1)
    assert cache.stats() == CacheStats(entries=0, hits=0, misses=0)  # text lookups are not score lookups
    with pytest.raises(ValueError):
        cache.put_text("k", " ", {})
    assert list(tmp_path.iterdir()) == []
