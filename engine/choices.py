"""Labelled string enums for the pure layer, with the `values` / `labels` / `choices` that Django fields use.

A name such as Platform or ErrorKind is defined once, here in the pure layer, and is used both by code that
never imports Django (the evaluation pipeline, the simulator) and by model fields (`choices=Platform.choices`).
Members are `str`, so they compare and serialize as their value ("trn1"), as Django's TextChoices do.

    class Colour(Choices):
        RED = "red", "Bright red"
"""

from __future__ import annotations

from collections.abc import Iterator
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


class _OpenChoicesType(type):
    """The metaclass of OpenChoices: the class is the live set of its members (iterate it, `in`, `len`),
    `Cls(value)` finds a member, and `values` / `labels` / `choices` read the members there are now."""

    _members: dict[str, Any]

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
        declared = {key: value for key, value in namespace.items()
                    if key.isupper() and not key.startswith("_") and isinstance(value, (str, tuple))}
        for key in declared:
            del namespace[key]
        cls = super().__new__(mcs, name, bases, namespace)
        cls._members = {}
        for key, value in declared.items():
            value, label = (value, "") if isinstance(value, str) else value
            type.__setattr__(cls, key, cls.add(value, label))
        return cls

    def __call__(cls, value: str) -> Any:
        try:
            return cls._members[value]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not a valid {cls.__name__}") from None

    def __iter__(cls) -> Iterator[Any]:
        return iter(list(cls._members.values()))

    def __contains__(cls, value: object) -> bool:
        return value in cls._members

    def __len__(cls) -> int:
        return len(cls._members)

    @property
    def values(cls) -> list[str]:
        return [str(member) for member in cls._members.values()]

    @property
    def labels(cls) -> list[str]:
        return [member.label for member in cls._members.values()]

    @property
    def choices(cls) -> list[tuple[str, str]]:
        """(value, label) pairs as they are now (a model field takes a function returning them, so that members
        added after import are valid choices too: engine.platforms.registry.platform_choices)."""
        return [(str(member), member.label) for member in cls._members.values()]

    def add(cls, value: str, label: str = "") -> Any:
        """A new member (a platform registered at run time); ValueError if the value is taken."""
        if not isinstance(value, str) or not value:
            raise ValueError(f"a {cls.__name__} needs a non-empty string value, got {value!r}")
        if value in cls._members:
            raise ValueError(f"{cls.__name__} {value!r} exists already")
        member = str.__new__(cls, value)
        member.label = label or value
        cls._members[value] = member
        return member

    def remove(cls, value: str) -> None:
        """Forget a member added at run time (a test's platform, once the test is over)."""
        cls._members.pop(value, None)


class OpenChoices(str, metaclass=_OpenChoicesType):
    """Labelled names like Choices, but a set that grows at run time: members declared in the class body
    (`NAME = "value", "Label"`) plus those `add`ed later (a platform registered by its definition). Members are
    `str`, so they compare, hash and serialize as their value; `.value` and `.label` read like an enum's."""

    label: str

    @property
    def value(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {str.__str__(self)!r}>"

