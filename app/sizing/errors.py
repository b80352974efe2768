"""The one exception the sizing engine raises for input it cannot model."""

from __future__ import annotations


class SizingError(ValueError):
    """Bad or out-of-model input.

    ``field`` and ``message`` describe the first problem; ``errors`` lists every problem
    found as ``(field, message)`` pairs (dotted paths such as ``"model.architecture.vocab_size"``).
    """

    def __init__(
        self, field: str, message: str, *, errors: list[tuple[str, str]] | None = None
    ) -> None:
        self.field = field
        self.message = message
        self.errors: list[tuple[str, str]] = list(errors) if errors else [(field, message)]
        super().__init__(f"{field}: {message}")

    @classmethod
    def many(cls, errors: list[tuple[str, str]]) -> SizingError:
        field, message = errors[0]
        return cls(field, message, errors=errors)

    def as_dict(self) -> dict[str, list[dict[str, str]]]:
        return {"errors": [{"field": f, "message": m} for f, m in self.errors]}
