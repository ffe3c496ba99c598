"""Plain value classes, for the modules every cold command imports.

``dataclasses`` costs a cold read more than its work: importing it loads ``inspect`` (with
``ast``, ``dis`` and ``tokenize``), and each class compiles its generated methods at import
(about 0.6 ms a class). A class here names its fields in ``_fields`` and sets them in its own
``__init__``; equality, hashing (when frozen) and repr follow the fields, as a dataclass's do.
"""

from __future__ import annotations

from typing import Any, ClassVar


class Value:
    """Compared and shown by ``_fields``, in order; mutable, so unhashable."""

    __slots__ = ()  # a subclass without __slots__ keeps its fields in __dict__
    _fields: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined, no-any-return]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({shown})"


class FrozenError(AttributeError):
    """Assigning to a field of a frozen value (dataclasses' FrozenInstanceError)."""


class Frozen(Value):
    """A :class:`Value` that cannot change once made (``__init__`` fills ``__dict__``), and so
    hashes by its fields."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenError(f"cannot delete field {name!r}")

    def __hash__(self) -> int:
        return hash(self._values())
