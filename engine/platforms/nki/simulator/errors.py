"""Errors a kernel author sees: which operation, which kernel source line, what was wrong.

`NKICompileError` is a rule the Neuron compiler would reject (shapes, buffers, unsupported operations);
`NKIRuntimeError` is something that would compute garbage on the device (uninitialised reads, out of
bounds indices, racing writes between `affine_range` iterations). `BlockRecyclingMiss` is the
simulator's own: a storage guess was wrong, and the kernel runs again.
"""

from __future__ import annotations


class NKIError(Exception):
    """Base error: `op` is the NKI operation, `line` the kernel source line (0 if unknown)."""

    def __init__(self, op: str, detail: str, line: int = 0) -> None:
        self.op = op
        self.detail = detail
        self.line = line
        super().__init__(self._message())

    def _message(self) -> str:
        if self.line:
            return f"{self.op} at line {self.line}: {self.detail}"
        return f"{self.op}: {self.detail}"

    def __str__(self) -> str:
        return self._message()

    def with_line(self, line: int) -> NKIError:
        if not self.line and line:
            self.line = line
            self.args = (self._message(),)
        return self


class NKICompileError(NKIError):
    """The kernel breaks a hardware or language rule the compiler enforces."""


class NKIRuntimeError(NKIError):
    """The kernel would read garbage or race on the device."""


def unsupported(op: str, what: str = "") -> NKICompileError:
    """The simulator does not implement `op` (or one of its options)."""
    suffix = f" ({what})" if what else ""
    return NKICompileError(op, f"{op}{suffix} is unsupported by the CPU simulator")


class BlockRecyclingMiss(Exception):
    """Not an NKI error: the block recycler (recycling.py) reused a block the kernel needs again.
    `simulate` runs the kernel again with plain storage."""
