"""NKI's steps in the reference-file pipeline (engine.evaluator.reference_pipeline): record, then verify.

With the simulator the kernel child runs once, on the first seed, and records its program; a verifier child (our
code only, `engine.platforms.nki.roles:VerifyRole`) checks it and replays it on every seed, and its outputs are
what the parent compares with the reference's; then the verifier prices the trace it checked with the performance
model, so the model never runs next to untrusted code. The registry names `NkiAttempt` as NKI's "attempt" part, so the shared pipeline takes these steps for NKI
kernels. See docs/evaluation.md ("Record, then verify").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.evaluator import checks
from engine.evaluator.reference_pipeline import Attempt, Rendered, Stop, peak_kwargs
from engine.evaluator.result import ErrorKind
from engine.evaluator.sandbox.process import ChildError, ChildProcess
from engine.platforms.nki.frames import check_trace_precision, trace_dtypes
from engine.platforms.nki.roles import (
    first_difference,
    record_reply_budget,
    record_reply_check,
    replay_reply_budget,
)

# A correct kernel must show at least this share of the problem's FLOPs in its trace (NKIBench's counts
# exclude operations on constants, so honest kernels do at least the counted work; 10% leaves room for
# fused activations the simulator counts as one operation per element).
MIN_VISIBLE_WORK = 0.10


class NkiAttempt(Attempt):
    """The shared attempt, with the simulator's recorded program verified and its trace checked."""

    verify_role = "engine.platforms.nki.roles:VerifyRole"

    def later_trace(self, trace: dict[str, Any]) -> dict[str, Any]:
        # Only the first seed's trace is profiled; the others need their length only.
        return {"instructions": len(trace["arrays"]["trace.col.engine"])} if "arrays" in trace else trace

    def verified_outputs(self, kernel: ChildProcess, verifier: ChildProcess, reference: ChildProcess,
                         rendered: Rendered, request: dict[str, Any],
                         ) -> tuple[list[np.ndarray], dict[str, Any] | None, Rendered | Stop | None]:
        """The verifier's outputs for one seed. On the first, the kernel child runs once and records its program;
        the verifier checks it, and the kernel's own outputs must equal the replay's bit for bit. While the kernel
        records (first seed) or the verifier replays (later seeds), the reference renders the next seed. With the
        last seed's replay goes the request to price the trace, answered after it (`profile` reads it)."""
        index, inputs, expected, where = rendered.index, rendered.inputs, rendered.expected, rendered.where
        flags = {"compiled": True, "runnable": True}
        recorded, trace, ahead = None, None, None
        if index == 0:
            try:
                kernel.send({"op": "run", "record": True, **request}, inputs)
            except ChildError as exc:
                raise self.child_failed(exc, "kernel", compiled=True) from None
            ahead = self.render_ahead(reference, index + 1)
            try:
                ran, produced = kernel.receive(max_reply_bytes=record_reply_budget(list(inputs.values()), expected),
                                               check=record_reply_check(list(inputs.values()), expected))
            except ChildError as exc:
                raise self.child_failed(exc, "kernel", compiled=True) from None
            if not ran["ok"]:
                raise self.kernel_reply_failed(ran, compiled=ran["kind"] != ErrorKind.COMPILE_ERROR.value,
                                               runnable=False)
            recorded = [produced.pop(f"out{i}") for i in range(ran["output_count"])]
            arrays = {k: v for k, v in produced.items() if k.startswith(("trace.", "program."))}
            del produced
            verifier.restart_clock()  # it waited for the recording
            try:
                # lazy: the parent loads the simulator's package only to check a recording
                from engine.platforms.nki.simulator.verification.source_loops import stated_loop_kinds

                stated = sorted(stated_loop_kinds(self.kernel_source).items())  # the source's, not the kernel's
                loaded, _ = verifier.request({"op": "load", "platform": self.platform, "trace": ran["trace"],
                                              "stated_loops": [list(pair) for pair in stated]}, arrays)
            except ChildError as exc:
                raise self.child_failed(exc, "verify", **flags) from None
            if not loaded["ok"]:
                raise self.fail(ErrorKind(loaded["kind"]), "the kernel's recorded program failed verification: "
                                f"{loaded['message']}", line=loaded.get("line"), **flags)
            trace = {"meta": ran["trace"], "arrays": {k: v for k, v in arrays.items() if k.startswith("trace.")},
                     "latency_ms": None}
            del arrays
            try:
                check_trace_precision(trace_dtypes(trace), checks.reference_precision(expected))
            except checks.CheckFailed as exc:
                raise self.fail(ErrorKind.INCORRECT, str(exc), line=exc.line, **flags) from None
        try:
            verifier.send({"op": "replay", "check_rows": index == 0, **request}, inputs)
            if index == len(self.seeds) - 1:
                self.send_profile(verifier)
            if ahead is None:
                ahead = self.render_ahead(reference, index + 1)
            replayed, produced = verifier.receive(max_reply_bytes=replay_reply_budget(expected))
        except ChildError as exc:
            raise self.child_failed(exc, "verify", **flags) from None
        if not replayed["ok"]:
            raise self.fail(ErrorKind(replayed["kind"]), f"the kernel's recorded program failed verification on "
                            f"{where}: {replayed['message']}", line=replayed.get("line"), **flags)
        outputs = [produced.pop(f"out{i}") for i in range(replayed["output_count"])]
        del produced
        if replayed.get("modified_input"):
            raise self.fail(ErrorKind.INCORRECT, f"{replayed['modified_input']} ({where})", **flags)
        if recorded is not None:
            difference = first_difference(recorded, outputs)
            if difference:
                raise self.fail(ErrorKind.INCORRECT, f"the kernel's outputs for {where} are not what its recorded "
                                f"instructions compute ({difference}): values written outside its instructions do "
                                "not count", **flags)
        return outputs, trace, ahead

    def check_recorded_trace(self, traces: list[dict[str, Any] | None]) -> None:
        correct = {"compiled": True, "runnable": True, "correct": True}
        counts = {_instruction_count(t) for t in traces if t is not None}
        if len(counts) > 1:
            raise self.fail(ErrorKind.SUSPICIOUS, "the kernel executed different instruction streams for "
                            f"different inputs ({sorted(counts)} instructions); NKI kernels are traced once "
                            "per shape, so this looks like input-dependent shortcuts", **correct)
        if not min(counts):
            raise self.fail(ErrorKind.SUSPICIOUS, "the kernel's outputs are correct but the simulator recorded "
                            "no instructions: its work is hidden from the performance model", **correct)
        first = traces[0]
        if first is not None:  # always: the caller checks the first seed's trace
            self.check_visible_work(first)

    def check_visible_work(self, trace: dict[str, Any]) -> None:
        """A correct kernel whose trace does a small fraction of the problem's arithmetic did the rest
        somewhere the simulator cannot see (numpy on raw storage, say): its latency would be a lie."""
        # lazy: the parent loads the simulator's package only to check a trace
        from engine.platforms.nki.simulator.trace import Engine

        if not self.peak_counts:
            return
        counts = peak_kwargs(self.peak_counts)
        needed = counts["vector_flops"] + counts["matmul_flops"]
        arrays = trace["arrays"]
        compute = arrays["trace.col.engine"] != int(Engine.DMA)  # DMA moves data, it does no arithmetic
        done = float(np.sum(arrays["trace.col.flops"][compute], dtype=np.float64))
        if needed > 0 and done < MIN_VISIBLE_WORK * needed:
            raise self.fail(ErrorKind.SUSPICIOUS, f"the kernel's trace performs {done:.3g} FLOPs on the compute "
                            f"engines, under {MIN_VISIBLE_WORK:.0%} of the {needed:.3g} the problem needs: its work "
                            "is hidden from the simulator; held for review", compiled=True, runnable=True,
                            correct=True)


def _instruction_count(trace: dict[str, Any]) -> int:
    if "instructions" in trace:
        return int(trace["instructions"])
    return len(trace["arrays"]["trace.col.engine"])
