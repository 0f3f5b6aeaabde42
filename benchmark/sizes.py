"""Sizes as a person writes them: 12.1 MiB, not 12412.0 KiB (messages of the upload form, the API, the CLI)."""

from __future__ import annotations

UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB")


def human_bytes(size: float) -> str:
    """The largest binary unit that keeps the number at 1 or more: 900 bytes, 1.5 KiB, 12.1 MiB, 2 GiB."""
    value, unit = float(size), UNITS[0]
    for unit in UNITS:
        if abs(value) < 1024 or unit == UNITS[-1]:
            break
        value /= 1024
    if unit == "bytes":
        return f"{int(value)} bytes"
    return f"{value:.1f}".removesuffix(".0") + f" {unit}"
