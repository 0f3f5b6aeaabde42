"""Labelled string enums for the pure layer, with the `values` / `labels` / `choices` that Django fields use.

A name such as Platform or ErrorKind is defined once, here in the pure layer, and is used both by code that
never imports Django (the evaluation pipeline, the simulator) and by model fields (`choices=Platform.choices`).
Members are `str`, so they compare and serialize as their value ("trn1"), as Django's TextChoices do.

    class Colour(Choices):
        RED = "red", "Bright red"
"""

from __future__ import annotations

from enum import EnumType, StrEnum
from typing import Any


class _ChoicesType(EnumType):
    @property
    def values(cls) -> list[str]:
        return [member.value for member in cls]  # type: ignore[attr-defined]

    @property
    def labels(cls) -> list[str]:
        return [member.label for member in cls]  # type: ignore[attr-defined]

    @property
    def choices(cls) -> list[tuple[str, str]]:
        """(value, label) pairs: a model field's or a form field's `choices`."""
        return [(member.value, member.label) for member in cls]  # type: ignore[attr-defined]


class Choices(StrEnum, metaclass=_ChoicesType):
    """A member is written `NAME = "value", "Label"`; without a label the value is its label."""

    label: str

    def __new__(cls, value: str, label: str = "") -> Any:
        member = str.__new__(cls, value)
        member._value_ = value
        member.label = label or value
        return member
