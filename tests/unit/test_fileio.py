"""bench.json's writer: the entries encoded once give the file json.dumps gives."""

import json

import pytest

from suite.common import fileio


@pytest.mark.parametrize(
    "items",
    [
        [],
        [{"name": "a", "stats": {"data": [1e-05, 2.5, 3]}, "extra_info": {"label": "x\ny", "tags": []}}],
        [{"x": 1}, [1, [2, {}]], "s", None, 0.1],
    ],
)
def test_dumps_with_list_is_json_dumps(items):
    obj = {"machine_info": {"k": [1, 2]}, "benchmarks": items, "datetime": "d", "suite": {"complete": False}}
    encoded = [json.dumps(i, indent=1, default=str) for i in items]
    assert fileio.dumps_with_list(obj, "benchmarks", encoded) == json.dumps(obj, indent=1, default=str)


def test_dumps_with_list_places_the_entries_where_the_key_is():
    text = fileio.dumps_with_list({"a": 1, "b": None, "c": 2}, "b", ['{"x": 1}'])
    assert list(json.loads(text)) == ["a", "b", "c"] and json.loads(text)["b"] == [{"x": 1}]


def test_a_write_without_fsync_is_still_atomic(tmp_path):
    p = tmp_path / "run" / "bench.json"
    fileio.write_json_atomic(p, {"n": 1})
    fileio.write_text_atomic(p, '{"n": 2}', durable=False)  # the in-progress rewrites after each case
    assert json.loads(p.read_text()) == {"n": 2}
    assert [f.name for f in p.parent.iterdir()] == ["bench.json"]  # no temp file left behind


def test_bench_json_entries_are_encoded_once():
    """bench.json is rewritten after every case: an entry is encoded when it is new, never again."""
    from types import SimpleNamespace

    from suite.harness.pytest import results_file, run_state

    class Bench:
        has_error = False

        def __init__(self, name):
            self.name, self.encoded = name, 0

        def as_dict(self, include_data):
            self.encoded += 1
            return {"name": self.name, "stats": {"data": [1.0]} if include_data else {}}

    benches = [Bench("a")]
    config = SimpleNamespace(_benchmarksession=SimpleNamespace(benchmarks=benches), stash={})
    config.stash[run_state.RUN] = run_state.RunState(cfg=None, rank=0)
    first = results_file.encoded_benchmarks(config)
    benches.append(Bench("b"))
    second = results_file.encoded_benchmarks(config)
    assert [b.encoded for b in benches] == [1, 1]
    assert second[0] == first[0] and [json.loads(e)["name"] for e in second] == ["a", "b"]
    assert json.loads(second[1])["stats"]["data"] == [1.0]  # with the samples, as pytest-benchmark lists them
