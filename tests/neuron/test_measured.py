"""A correct kernel on the neuron backend: the SDK calls made, the timing rules, the profile parsed and marked.

Against test doubles of neuronxcc and neuron-profile (conftest.py): this proves what we call and how we read
the answers, not how fast anything is.
"""

from __future__ import annotations

from engine.evaluator import ErrorKind, evaluate
from engine.platforms.nki.neuron.summary import MEASURED_KEY, MEASURED_VALUE
from engine.platforms.nki.perf.profile import COUNTER_NAMES
from engine.platforms.nki.suites.loader import load_suite
from tests.evaluation.conftest import ADD_REFERENCE
from tests.neuron import recorded
from tests.neuron.conftest import ACCELOPT_COMPILE_OPTIONS, LIMITS, add_kernel


def test_a_correct_kernel_is_measured_and_profiled_with_the_documented_calls(neuron_host) -> None:
    silu = load_suite("nkibench").problem("silu")
    result = evaluate(silu.baseline_for("mini"), silu.reference_source("mini"), backend="neuron", limits=LIMITS)

    assert result.ok and result.correct and result.attempts == 1, result.error_message
    assert result.backend == "neuron" and result.backend_version == "neuronx-cc 0.0.0+contract.double"
    # The device double answers for silu with the recorded trn1 measurement (the calibration CSV's row).
    case = recorded.load()["cases"]["silu_M4096_N7168"]
    assert result.latency_ms == case["latency_ms"]
    # Parsed into the simulator's counter names, every recorded counter there, and marked measured.
    expected = {name: float(value) for name, value in case["summary"].items() if name in COUNTER_NAMES}
    assert {k: v for k, v in result.profile.items() if k != MEASURED_KEY} == expected
    assert set(expected) <= set(COUNTER_NAMES) and "hbm_read_bytes" in expected
    assert result.profile[MEASURED_KEY] == MEASURED_VALUE
    assert result.perf_model_version == "" and result.timeline is None  # no model behind these numbers
    assert result.breakdown is None  # nothing explains a measured number: no breakdown is invented

    calls = neuron_host.calls()
    baremetal = [c for c in calls if c["call"] == "baremetal"]
    benchmark = [c for c in calls if c["call"] == "benchmark"]
    profiler = [c for c in calls if c["call"] == "neuron-profile"]
    # One compile-and-run per seed; every run saves its NEFF, the first also its trace, for the profiler.
    assert len(baremetal) == 3
    assert baremetal[0]["options"] == {"save_neff_name": "/accelopt-neuron/kernel.neff",
                                       "save_trace_name": "/accelopt-neuron/kernel.ntff",
                                       "additional_compile_opt": ACCELOPT_COMPILE_OPTIONS}
    assert [c["options"].get("save_trace_name") for c in baremetal[1:]] == [None, None]
    # Timing: five nki.benchmark measurements of 5 warm-up and 20 timed iterations, after every seed ran.
    assert len(benchmark) == 5
    assert all(c["options"] == {"warmup": 5, "iters": 20, "additional_compile_opt": ACCELOPT_COMPILE_OPTIONS}
               for c in benchmark)
    assert min(c["time"] for c in benchmark) > max(c["time"] for c in baremetal)
    # The profile: AccelOpt's command, on the first seed's NEFF and trace, in the profile child.
    assert [c["argv"] for c in profiler] == [["view", "--output-format", "summary-json", "-n",
                                              "/accelopt-neuron/kernel.neff", "-s", "/accelopt-neuron/kernel.ntff"]]
    # Pinned to one NeuronCore, with the device node and AccelOpt's compiler flags, in every SDK call.
    assert {c["NEURON_RT_VISIBLE_CORES"] for c in baremetal + benchmark} == {"0"}
    assert {tuple(c["devices"]) for c in baremetal + benchmark} == {("/dev/neuron0",)}
    assert {c["NEURON_CC_FLAGS"] for c in baremetal} == {"--auto-cast=none"}
    assert {c["NEURON_RT_EXEC_TIMEOUT"] for c in baremetal} == {"30"}


def test_the_latency_is_the_median_of_five_measurements_within_one_percent(neuron_host) -> None:
    # p50s of 100.0, 100.4, 100.8, 100.2, 100.6 us: spread 0.8% of the median 100.4 us, allowed.
    kernel = add_kernel({"latency_us": [100.0, 100.4, 100.8, 100.2, 100.6]})
    result = evaluate(kernel, ADD_REFERENCE, backend="neuron", limits=LIMITS)
    assert result.ok, result.error_message
    assert abs(result.latency_ms - 0.1004) < 1e-12
    assert len([c for c in neuron_host.calls() if c["call"] == "benchmark"]) == 5


def test_an_unstable_timing_is_refused_as_ours_after_three_tries(neuron_host) -> None:
    # Measurements alternate 100 and 103 us: a 3% spread on every try.
    kernel = add_kernel({"latency_us": [100.0, 103.0]})
    result = evaluate(kernel, ADD_REFERENCE, backend="neuron", limits=LIMITS)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and not result.is_kernel_result
    assert result.error_message.startswith("timing on this host is unstable: measurements spread")
    assert "on each of 3 attempts" in result.error_message
    assert result.latency_ms is None and result.attempts == 1  # the whole evaluation is not run again
    assert len([c for c in neuron_host.calls() if c["call"] == "benchmark"]) == 15
    assert not [c for c in neuron_host.calls() if c["call"] == "neuron-profile"]  # nothing profiled


def test_peak_fraction_and_the_suspicion_rule_apply_to_measured_latencies(neuron_host) -> None:
    # 128x512 fp32 add at 0.001 us: faster than HBM bandwidth allows, so held for review, as on the simulator.
    peak = {"vector_flops": 128 * 512, "matmul_flops": 0, "hbm_bytes": 3 * 4 * 128 * 512}
    result = evaluate(add_kernel({"latency_us": 0.001}), ADD_REFERENCE, backend="neuron", limits=LIMITS,
                      peak_counts=peak)
    assert result.error_kind is ErrorKind.SUSPICIOUS and result.correct
    assert result.peak_fraction > 1
