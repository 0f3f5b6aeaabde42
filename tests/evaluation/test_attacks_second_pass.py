"""Issue 35, trust second pass: one hostile kernel per mechanism the held-out corpus found.

1. the recorder is reachable from the kernel (real builtins through allowed imports): what it edits in its
   recording must not buy a lower price;
2. HBM boxes widened to the whole tensor (the model took the loads for repeats of one region);
3. op names relabelled (a matmul as a cheaper variant), while the model prices by name;
4. outputs that are not outputs (an SBUF tile; an input buffer);
5. the kernel makes its own evaluation an infrastructure error (malformed frames, deep JSON, a signal);
6. unknown arrays in a reply that the parent would read whole;
7. ptrace of pid 1 and /proc/1/mem inside the sandbox.

Every test fails on the code before issue 35 (checked on 8211753).
"""

from __future__ import annotations

import textwrap

import pytest

from engine.evaluator import ErrorKind, evaluate
from tests.evaluation.conftest import ADD_REFERENCE, FAST_LIMITS, needs_simulator

pytestmark = needs_simulator

NO_GUARDS = {"static": False, "imports": False, "audit": False}
SEEDS = (21, 22, 23)

IMPORTS = '''
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
'''

# The add kernel in four column tiles: each load reads a quarter of its input.
TILED_ADD = '''
@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(4):
        t = nl.add(nl.load(a[:, j * 128:(j + 1) * 128]), nl.load(b[:, j * 128:(j + 1) * 128]))
        nl.store(out[:, j * 128:(j + 1) * 128], value=t)
    return out
'''

# Widens every HBM read box of the recorded trace to the whole tensor, in the kernel's own process.
WIDEN_HBM_READS = '''
def widen(run):
    trace = run.trace
    trace.freeze()
    acc = trace.access
    for a in range(len(acc["tensor"])):
        info = trace.tensors[int(acc["tensor"][a])]
        if int(info.space) == 0 and not int(acc["is_write"][a]):
            acc["part_lo"][a], acc["part_hi"][a] = 0, 1
            acc["byte_lo"][a], acc["byte_hi"][a] = 0, info.total_bytes
    return run
'''


def run(kernel: str, reference: str = ADD_REFERENCE, guards: dict | None = None, **kwargs):
    return evaluate(textwrap.dedent(kernel), textwrap.dedent(reference), backend="simulator", limits=FAST_LIMITS,
                    seeds=SEEDS, _guards=guards, **kwargs)


def assert_not_cheaper(forged, honest) -> None:
    """A forged recording may fail, but it must never be judged correct at a lower price than the honest one."""
    assert honest.correct and honest.latency_ms, honest.error_message
    assert not (forged.correct and forged.latency_ms is not None and forged.latency_ms < honest.latency_ms), (
        f"forged {forged.latency_ms} ms judged correct against honest {honest.latency_ms} ms")


# -- 1. the recorder is reachable from the kernel, every guard on ----------------------------------------------

REACHES_THE_RECORDER_THROUGH_NUMPY = IMPORTS + WIDEN_HBM_READS + '''
real = np.ma.core.re.enum.bltns  # the interpreter's own builtins, through public attributes of allowed modules
verify = real.getattr(real, "__imp" + "ort__")("engine.platforms.nki.roles", None, None, ["record"])
honest_record = verify.record


def record(kernel, inputs, platform):
    backend_run, program = honest_record(kernel, inputs, platform)
    return widen(backend_run), program


real.setattr(verify, "record", record)
''' + TILED_ADD


def test_1_a_kernel_that_edits_its_own_recording_with_every_guard_on_buys_no_lower_price() -> None:
    honest = run(IMPORTS + TILED_ADD)
    forged = run(REACHES_THE_RECORDER_THROUGH_NUMPY)
    assert_not_cheaper(forged, honest)
    assert forged.error_kind is ErrorKind.INCORRECT and "failed verification" in forged.error_message


# -- 2. HBM boxes must be the footprint, not contain it ------------------------------------------------------

WIDENS_ITS_BOXES = IMPORTS + WIDEN_HBM_READS + '''
import engine.platforms.nki.roles as verify

honest_record = verify.record
verify.record = lambda kernel, inputs, platform: (lambda r: (widen(r[0]), r[1]))(honest_record(kernel, inputs,
                                                                                                platform))
''' + TILED_ADD


def test_2_hbm_read_boxes_widened_to_the_whole_tensor_fail_verification() -> None:
    honest = run(IMPORTS + TILED_ADD)
    forged = run(WIDENS_ITS_BOXES, guards=NO_GUARDS)
    assert_not_cheaper(forged, honest)
    assert forged.error_kind is ErrorKind.INCORRECT and not forged.correct
    assert "failed verification" in forged.error_message and "touches partitions" in forged.error_message


# -- 3. op names are what the replay executes ---------------------------------------------------------------

MATMUL_REFERENCE = '''
import numpy as np

def get_inputs():
    a = np.random.normal(size=(128, 128)).astype(np.float32)
    b = np.random.normal(size=(128, 512)).astype(np.float32)
    return [a, b]

def forward(a, b):
    return a.T @ b

def transform_to_nki_inputs(inputs):
    return inputs

def transform_nki_outputs(k_res, ref):
    return [np.reshape(k_res, ref.shape)]
'''

MATMUL = '''
@nki.jit
def kernel(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    product = nisa.nc_matmul(nl.load(a), nl.load(b))
    nl.store(out, value=nl.copy(product))
    return out
'''

RELABELS_ITS_MATMUL = IMPORTS + '''
import engine.platforms.nki.roles as verify

honest_record = verify.record


def record(kernel, inputs, platform):
    backend_run, program = honest_record(kernel, inputs, platform)
    trace = backend_run.trace
    trace.freeze()
    cheap = len(trace.op_names)
    trace.op_names.append("broadcast_matmul")  # a ones/zeros stationary: half the fp32 passes
    opcode = trace.columns["opcode"]
    opcode[opcode == trace.op_names.index("nc_matmul")] = cheap
    return backend_run, program


verify.record = record
''' + MATMUL


def test_3_a_matmul_relabelled_as_a_cheaper_variant_fails_verification() -> None:
    honest = run(IMPORTS + MATMUL, MATMUL_REFERENCE)
    forged = run(RELABELS_ITS_MATMUL, MATMUL_REFERENCE, guards=NO_GUARDS)
    assert_not_cheaper(forged, honest)
    assert forged.error_kind is ErrorKind.INCORRECT and "failed verification" in forged.error_message
    assert "broadcast_matmul" in forged.error_message


def test_3_a_reduction_relabelled_as_a_copy_is_refused_by_the_verifier() -> None:
    from engine.platforms.nki.simulator import install, simulate
    from engine.platforms.nki.simulator.verification.program import ReplayError
    from engine.platforms.nki.simulator.verification.replay import replay

    install()
    import neuronxcc.nki.language as nl
    import numpy as np

    def kernel(a):
        out = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.sum(nl.load(a), axis=1, keepdims=True))
        return out

    a = np.random.default_rng(0).normal(size=(128, 512)).astype(np.float32)
    simulation = simulate(kernel, [a], record_trace=True, record_program=True)
    trace = simulation.trace
    trace.freeze()
    reduce_row = next(ins[4] for ins in simulation.program.instructions if ins[0] == "reduce")
    trace.op_names.append("tensor_copy")
    trace.columns["opcode"][reduce_row] = len(trace.op_names) - 1
    with pytest.raises(ReplayError, match="tensor_copy"):
        replay(simulation.program, [a], trace=trace)


def test_3_an_accumulating_loop_reduce_relabelled_as_a_copy_is_refused_by_the_verifier() -> None:
    from engine.platforms.nki.simulator import install, simulate
    from engine.platforms.nki.simulator.verification.program import ReplayError
    from engine.platforms.nki.simulator.verification.replay import replay

    install()
    import neuronxcc.nki.language as nl
    import numpy as np

    def kernel(x):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        total = nl.ndarray((nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(4):
            total[nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.loop_reduce(
                nl.load(x[j]), op=np.add, loop_indices=[j])
        nl.store(out, value=total)
        return out

    x = np.random.default_rng(0).normal(size=(4, 128, 64)).astype(np.float32)
    simulation = simulate(kernel, [x], record_trace=True, record_program=True)
    trace = simulation.trace
    trace.freeze()
    rows = [ins[4] for ins in simulation.program.instructions
            if ins[4] >= 0 and trace.op_names[int(trace.columns["opcode"][ins[4]])] == "loop_reduce"]
    assert len(rows) == 4
    replay(simulation.program, [x], trace=trace)  # honest: verifies
    trace.op_names.append("copy")  # flexible and elidable as a repeat in the model
    trace.columns["opcode"][rows] = len(trace.op_names) - 1
    with pytest.raises(ReplayError, match="'copy'"):
        replay(simulation.program, [x], trace=trace)


def _relabelled_price(kernel, inputs: list, row_kind: str, label: str) -> tuple[float, float]:
    """The model's latency of `kernel`'s honest trace and of the same trace with every row of `row_kind` relabelled
    `label`, after the verifier has replayed the forged one (it must pass: the label names what runs)."""
    from engine.platforms.nki.perf import estimate
    from engine.platforms.nki.simulator import install, simulate
    from engine.platforms.nki.simulator.verification.replay import replay

    install()
    honest = simulate(kernel, inputs, record_trace=True, record_program=True)
    forged = simulate(kernel, inputs, record_trace=True, record_program=True)
    trace = forged.trace
    trace.freeze()
    rows = [ins[4] for ins in forged.program.instructions if ins[0] == row_kind and ins[4] >= 0]
    assert rows
    trace.op_names.append(label)
    trace.columns["opcode"][rows] = len(trace.op_names) - 1
    replay(forged.program, inputs, trace=trace)
    return estimate(honest.trace).latency_ms, estimate(trace).latency_ms


def test_3_a_language_reduction_relabelled_tensor_reduce_costs_what_it_cost() -> None:
    """nl.sum is nisa.tensor_reduce on the device: one `reduce` in the replay, so one price (the model floored
    only the nl.sum label at the minimum instruction time; on a 32-element free axis the relabel was cheaper)."""
    import neuronxcc.nki.language as nl
    import numpy as np

    def kernel(a):
        out = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        tile = nl.load(a)
        for j in nl.static_range(16):
            nl.store(out[:, j:j + 1], value=nl.sum(tile[:, j * 32:(j + 1) * 32], axis=1, keepdims=True))
        return out

    a = np.random.default_rng(0).normal(size=(128, 512)).astype(np.float32)
    honest, forged = _relabelled_price(kernel, [a], "reduce", "tensor_reduce")
    assert forged == honest


def test_3_a_loop_reduce_into_a_fresh_tile_is_a_copy_and_costs_one() -> None:
    """A loop_reduce whose result is not assigned into an accumulator accumulates nothing: the simulator labels it
    `copy`, and the verifier refuses the `loop_reduce` label on it (the model priced the two apart: a copy may move
    to the Scalar Engine and be elided as a repeat)."""
    from engine.platforms.nki.simulator import install, simulate
    from engine.platforms.nki.simulator.verification.program import ReplayError
    from engine.platforms.nki.simulator.verification.replay import replay

    install()
    import neuronxcc.nki.language as nl
    import numpy as np

    def kernel(x):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        for j in nl.affine_range(4):
            fresh = nl.loop_reduce(nl.load(x[j]), op=np.add, loop_indices=[j])
            nl.store(out[j], value=fresh)
        return out

    x = np.random.default_rng(0).normal(size=(4, 128, 64)).astype(np.float32)
    simulation = simulate(kernel, [x], record_trace=True, record_program=True)
    trace = simulation.trace
    trace.freeze()
    rows = [ins[4] for ins in simulation.program.instructions if ins[0] == "convert" and ins[4] >= 0
            and trace.op_names[int(trace.columns["opcode"][ins[4]])] != "load"]
    assert [trace.op_names[int(trace.columns["opcode"][row])] for row in rows] == ["copy"] * 4
    replay(simulation.program, [x], trace=trace)  # honest: verifies
    trace.op_names.append("loop_reduce")
    trace.columns["opcode"][rows] = len(trace.op_names) - 1
    with pytest.raises(ReplayError, match="'loop_reduce'"):
        replay(simulation.program, [x], trace=trace)


def _tensor_tensor_chain(nisa, nl, engine):
    def kernel(a, b):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        for _ in nl.static_range(8):
            x = nisa.tensor_tensor(x, y, op=nl.add, engine=engine)
        nl.store(out, value=x)
        return out
    return kernel


def test_3_an_engine_the_instructions_page_does_not_name_is_refused_in_the_trace_and_the_source() -> None:
    """tensor_tensor runs on the Vector or GpSimd Engine; on the Scalar Engine the model skipped the two-operand
    Vector rate (1.7x cheaper). A row claiming it fails verification, and a kernel asking for it does not compile."""
    from engine.platforms.nki.simulator import NKICompileError, install, simulate
    from engine.platforms.nki.simulator.trace import Engine
    from engine.platforms.nki.simulator.verification.program import ReplayError
    from engine.platforms.nki.simulator.verification.replay import replay

    install()
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl
    import numpy as np

    a, b = (np.random.default_rng(k).normal(size=(128, 512)).astype(np.float32) for k in (0, 1))
    simulation = simulate(_tensor_tensor_chain(nisa, nl, nisa.vector_engine), [a, b], record_trace=True,
                          record_program=True)
    trace = simulation.trace
    trace.freeze()
    rows = [ins[4] for ins in simulation.program.instructions if ins[0] == "binary"]
    replay(simulation.program, [a, b], trace=trace)  # honest: verifies
    trace.columns["engine"][rows] = int(Engine.SCALAR)
    with pytest.raises(ReplayError, match="says engine"):
        replay(simulation.program, [a, b], trace=trace)
    with pytest.raises(NKICompileError, match="tensor_tensor runs on the vector or gpsimd engine, not the scalar"):
        simulate(_tensor_tensor_chain(nisa, nl, nisa.scalar_engine), [a, b])


# -- 3b. loop kinds are the source's -------------------------------------------------------------------------

# Every iteration rewrites all of acc: the race rule refuses an affine label, a static one it does not bind (and it
# lets the model overlap the iterations' exponentials with the additions: 0.0081 ms against 0.0093 ms).
SEQUENTIAL_ADD = '''
@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    acc[...] = nl.load(a)
    for i in nl.sequential_range(4):
        acc[...] = nl.add(acc, nl.exp(nl.load(b)))
    nl.store(out, value=acc)
    return out
'''
EXP_REFERENCE = ADD_REFERENCE.replace("return a + b", "return a + 4 * np.exp(b)")

LABELS_ITS_SEQUENTIAL_LOOP_STATIC = IMPORTS + '''
import engine.platforms.nki.simulator.trace as trace_module

honest_add_loop = trace_module.Trace.add_loop


def static_add_loop(self, info):
    return honest_add_loop(self, trace_module.LoopInfo(kind=trace_module.LoopKind.STATIC,
                                                       trip_count=info.trip_count, line=info.line))


trace_module.Trace.add_loop = static_add_loop
''' + SEQUENTIAL_ADD


def test_3b_a_sequential_loop_labelled_static_in_the_trace_is_incorrect_naming_the_sources_kind() -> None:
    """No barrier between the iterations of a static loop: the label was priced lower and no replay rule binds it;
    the kernel's source, which the parent has, says sequential_range."""
    honest = run(IMPORTS + SEQUENTIAL_ADD, EXP_REFERENCE)
    forged = run(LABELS_ITS_SEQUENTIAL_LOOP_STATIC, EXP_REFERENCE, guards=NO_GUARDS)
    assert_not_cheaper(forged, honest)
    assert forged.error_kind is ErrorKind.INCORRECT and "failed verification" in forged.error_message
    assert "loop at line 24 is a static_range loop; the kernel's source makes it a sequential_range loop" \
        in forged.error_message, forged.error_message


def test_3b_loop_kinds_are_read_from_the_sources_own_imports_only() -> None:
    from engine.platforms.nki.simulator.trace import LoopKind
    from engine.platforms.nki.simulator.verification.source_loops import stated_loop_kinds

    stated = stated_loop_kinds(textwrap.dedent('''
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl
        import nki.language as nl6
        from neuronxcc.nki.language import sequential_range as seq

        def kernel(a, rng):
            for i in nl.affine_range(4):
                pass
            for j in nki.language.sequential_range(
                    4):
                pass
            for k in seq(2): pass
            for m in nl6.affine_range(2): pass
            for n in rng.affine_range(2): pass
            for p in range(3): pass
        '''))
    assert stated == {8: LoopKind.AFFINE, 10: LoopKind.SEQUENTIAL, 11: LoopKind.SEQUENTIAL, 13: LoopKind.SEQUENTIAL,
                      14: LoopKind.STATIC}  # NKI 0.6's iterators are unrolled; a parameter's range is not stated
    assert stated_loop_kinds("nl = None\nimport neuronxcc.nki.language as nl\nfor i in nl.affine_range(2): pass") == {}


def _two_loads_of_one_region():
    import neuronxcc.nki.language as nl
    import numpy as np

    def kernel(a, b):
        out = nl.ndarray((4, 128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            x = nl.load(a)
            y = nl.load(a)  # another statement: another DMA, though it loads the same region
            nl.store(out[i], value=nl.add(nl.add(x, y), nl.load(b[i])))
        return out

    rng = np.random.default_rng(0)
    return kernel, [rng.standard_normal((128, 512), dtype=np.float32),
                    rng.standard_normal((4, 128, 512), dtype=np.float32)]


def test_3b_a_row_moved_to_another_line_is_refused() -> None:
    """The model takes a load run again from one line for a repeat it may hoist: the second statement's loads
    moved to the first's line were priced 9% lower (0.0099 ms against 0.0108). A row's line is its instruction's."""
    from engine.platforms.nki.perf import estimate
    from engine.platforms.nki.simulator import install, simulate
    from engine.platforms.nki.simulator.verification.program import ReplayError
    from engine.platforms.nki.simulator.verification.replay import replay

    install()
    kernel, inputs = _two_loads_of_one_region()
    simulation = simulate(kernel, inputs, record_trace=True, record_program=True)
    trace = simulation.trace
    trace.freeze()
    honest = estimate(trace).latency_ms
    lines = trace.columns["line"]
    first = int(min(lines))
    lines[lines == first + 1] = first
    assert estimate(trace).latency_ms < honest  # the motive
    with pytest.raises(ReplayError, match=rf"says line {first}; its instruction is at line {first + 1}"):
        replay(simulation.program, inputs, trace=trace)


def test_3b_rows_regrouped_into_iterations_that_did_not_run_so_are_refused() -> None:
    from engine.platforms.nki.simulator import install, simulate
    from engine.platforms.nki.simulator.verification.program import ReplayError
    from engine.platforms.nki.simulator.verification.replay import replay

    install()
    kernel, inputs = _two_loads_of_one_region()
    simulation = simulate(kernel, inputs, record_trace=True, record_program=True)
    trace = simulation.trace
    trace.freeze()
    ctx = trace.columns["loop_ctx"]
    last = int(ctx[-1])  # a row of the last iteration claims to be in the first
    ctx[-1] = next(c for c, nest in enumerate(trace.loop_contexts) if nest and nest[-1][1] == 0)
    assert int(ctx[-1]) != last
    with pytest.raises(ReplayError, match="is not one run of its statement in program order"):
        replay(simulation.program, inputs, trace=trace)


# -- 4. outputs are HBM tensors the program allocated and wrote ----------------------------------------------

RETURNS_ITS_SBUF_TILE = IMPORTS + '''
@nki.jit
def kernel(a, b):
    return nl.add(nl.load(a), nl.load(b))  # no store: the result never reaches HBM
'''

COPY_REFERENCE = ADD_REFERENCE.replace("return a + b", "return a")

RETURNS_ITS_INPUT = IMPORTS + '''
@nki.jit
def kernel(a, b):
    nl.load(a)  # one instruction, so the trace is not empty
    return a
'''


def test_4_an_output_in_sbuf_is_refused() -> None:
    result = run(RETURNS_ITS_SBUF_TILE)
    assert result.error_kind is ErrorKind.INCORRECT and not result.correct and result.latency_ms is None
    assert "output 0" in result.error_message and "HBM" in result.error_message


def test_4_an_output_that_is_an_input_buffer_is_refused() -> None:
    result = run(RETURNS_ITS_INPUT, COPY_REFERENCE)
    assert result.error_kind is ErrorKind.INCORRECT and not result.correct and result.latency_ms is None
    assert "output 0" in result.error_message and "input" in result.error_message


# -- 5. the kernel's failures are the kernel's ---------------------------------------------------------------

WRITES_A_RAW_FRAME = IMPORTS + '''
import json
import struct
import sys

BODY = {body}


def proto_out():
    frame = sys._getframe()
    while "proto_out" not in frame.f_locals:  # up to the child's main loop, which holds the protocol stream
        frame = frame.f_back
    return frame.f_locals["proto_out"]


@nki.jit
def kernel(a, b):
    head = BODY()
    stream = proto_out()
    stream.write(struct.pack(">QQ", len(head), 0) + head)
    stream.flush()
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
    return out
'''

FRAMES = {
    "not json": 'lambda: b"this is not json"',
    "an object dtype": 'lambda: json.dumps({"ok": True, "__arrays__": [["out0", "|O", [1]]]}).encode()',
    "json nested 200000 deep": 'lambda: b"[" * 200000 + b"]" * 200000',
}


@pytest.mark.parametrize("frame", sorted(FRAMES))
def test_5_a_malformed_frame_from_the_kernels_process_is_its_runtime_error_not_retried(frame: str) -> None:
    result = run(WRITES_A_RAW_FRAME.format(body=FRAMES[frame]), guards=NO_GUARDS)
    assert result.error_kind is ErrorKind.RUNTIME_ERROR, result.error_message
    assert result.attempts == 1 and result.is_kernel_result and not result.correct


def test_5_a_kernel_that_kills_itself_with_a_signal_is_its_runtime_error_not_retried() -> None:
    result = run(IMPORTS + '''
import os
import signal


@nki.jit
def kernel(a, b):
    os.kill(os.getpid(), signal.SIGKILL)
''', guards=NO_GUARDS)
    assert result.error_kind is ErrorKind.RUNTIME_ERROR, result.error_message
    assert "signal 9" in result.error_message
    assert result.attempts == 1 and result.is_kernel_result


# -- 6. unknown arrays are refused before they are read ------------------------------------------------------

PADS_ITS_REPLY = IMPORTS + '''
import sys

child = sys.modules["__main__"]  # the child runs as `python -m engine.evaluator.child`
honest_run = child.KernelRole.run


def padded_run(self, header, arrays):
    reply, out = honest_run(self, header, arrays)
    out["program.padding"] = np.zeros(32 * 1024**2, dtype=np.uint8)  # the parent would read it whole
    return reply, out


child.KernelRole.run = padded_run
''' + TILED_ADD


def test_6_an_unknown_array_in_the_kernels_reply_is_refused() -> None:
    result = run(PADS_ITS_REPLY, guards=NO_GUARDS)
    assert not result.correct and result.error_kind is ErrorKind.RUNTIME_ERROR, result.error_message
    assert "program.padding" in result.error_message and result.attempts == 1


def test_6_an_unknown_field_in_the_kernels_reply_is_refused() -> None:
    result = run(PADS_ITS_REPLY.replace('out["program.padding"] = np.zeros(32 * 1024**2, dtype=np.uint8)',
                                        'reply["extra"] = "x" * 1000'), guards=NO_GUARDS)
    assert not result.correct and result.error_kind is ErrorKind.RUNTIME_ERROR, result.error_message
    assert "extra" in result.error_message


# -- 7. a seccomp filter in every sandbox child --------------------------------------------------------------

PROBES_PID_1 = IMPORTS + '''
import ctypes
import errno
import os

PTRACE_ATTACH, PTRACE_DETACH = 16, 17


def probe():
    escaped = []
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(PTRACE_ATTACH, 1, None, None) == 0:
        libc.ptrace(PTRACE_DETACH, 1, None, None)
        escaped.append("ptrace(PTRACE_ATTACH, 1) succeeded")
    try:
        fd = os.open("/proc/1/mem", os.O_RDWR)
    except OSError as exc:
        pass
    else:
        os.close(fd)
        escaped.append("/proc/1/mem opened read-write")
    if libc.syscall(310, 1, None, 0, None, 0, 0) >= 0 or ctypes.get_errno() != errno.EPERM:  # process_vm_readv
        escaped.append(f"process_vm_readv did not fail with EPERM (errno {ctypes.get_errno()})")
    if escaped:
        raise RuntimeError("; ".join(escaped))
''' + '''
@nki.jit
def kernel(a, b):
    probe()
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
    return out
'''


def test_7_ptrace_of_pid_1_and_its_memory_are_out_of_reach_in_the_sandbox() -> None:
    from engine.evaluator.sandbox import isolation

    if not isolation.isolation_required():
        pytest.skip("the OS sandbox is off (opt-out)")
    result = run(PROBES_PID_1, guards=NO_GUARDS)
    assert result.correct, result.error_message
