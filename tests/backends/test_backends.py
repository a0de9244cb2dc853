"""`fwdasv.backends`: a bench that ran other shapes than asked, or left a case out, is a shape
problem (recorded vLLM outputs, tests/recorded_runs.py).
"""

from __future__ import annotations

import copy

import pytest
from recorded_runs import SINGLE, cache_from, raw

from fwdasv.asv.suite import RefusedLatency
from fwdasv.backends import shape_problems

# A suite runs as written: no FWDASV_ITERS, FWDASV_SAMPLES or FWDASV_MODEL_DIR from outside.
pytestmark = pytest.mark.usefixtures("no_suite_overrides")


def test_a_jittered_kv_length_is_a_shape_problem_and_refused(tmp_path):
    asked = raw(SINGLE)
    ran = copy.deepcopy(asked)
    decode = ran[0]
    assert decode["requests"][3]["kv_len"] == 1024
    decode["requests"][3]["kv_len"] = 1187  # what vLLM's default jitter does to a prefix
    suite, cache, outcome = cache_from(tmp_path, SINGLE, ran, suite_data=asked)
    n = len(decode["requests"])
    assert outcome.problems == {
        "decode": [
            "ran other shapes than requested (KV-length jitter?): "
            f"asked {n}*1@1024, got 3*1@1024,1@1187,{n - 4}*1@1024"
        ]
    }
    assert list(cache.summary("decode").refusals) == outcome.problems["decode"]
    with pytest.raises(RefusedLatency, match="KV-length jitter"):
        suite.track_latency(cache, "decode")
    assert suite.track_latency(cache, "prefill")["number"] == 1


def test_a_missing_case_is_a_shape_problem_and_fails(tmp_path):
    asked = raw(SINGLE)
    ran = asked[:1]
    suite, cache, outcome = cache_from(tmp_path, SINGLE, ran, suite_data=asked)
    assert outcome.problems == {"prefill": ["missing from the bench output"]}
    assert shape_problems(outcome.config, outcome.results) == outcome.problems
    entry = cache.summary("prefill")
    assert entry.error == "missing from the bench output"
    suite.setup(cache, "prefill")
    with pytest.raises(RuntimeError, match="prefill: the bench failed: missing from the bench"):
        suite.track_latency(cache, "prefill")
    assert suite.track_latency(cache, "decode")["number"] == 1
