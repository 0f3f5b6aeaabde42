"""Per-platform NeuronCore constants, one table per platform, each value with its source.

Pure Python: imported by the simulator (capacities, rules) and the performance model (rates). The
performance-model work extends this table; keep every constant here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class Platform:
    name: str
    core: str
    partitions: int  # SBUF/PSUM partitions (the partition dimension limit)
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int
    psum_bank_bytes_per_partition: int  # one PSUM tile: 2 KiB = 512 fp32 per partition


TRN1 = Platform(
    name="trn1",
    core="NeuronCore-v2",
    partitions=128,
    # Trainium architecture page: 24 MiB SBUF, 2 MiB PSUM per NeuronCore-v2, 128 partitions.
    sbuf_bytes_per_partition=24 * MIB // 128,
    psum_bytes_per_partition=2 * MIB // 128,
    psum_bank_bytes_per_partition=2 * KIB,
)

TRN2 = Platform(
    name="trn2",
    core="NeuronCore-v3",
    partitions=128,
    # Trainium2 architecture page: 24 MiB SBUF, 2 MiB PSUM per NeuronCore-v3 (to be re-checked by the perf work).
    sbuf_bytes_per_partition=24 * MIB // 128,
    psum_bytes_per_partition=2 * MIB // 128,
    psum_bank_bytes_per_partition=2 * KIB,
)

PLATFORMS: dict[str, Platform] = {p.name: p for p in (TRN1, TRN2)}


def get_platform(name: str) -> Platform:
    try:
        return PLATFORMS[name]
    except KeyError:
        raise ValueError(f"unknown platform {name!r}; expected one of {sorted(PLATFORMS)}") from None
