"""The one exception the sizing engine raises for input it cannot model."""

from __future__ import annotations

from typing import Any

from app.sizing.messages import Msg, Translate, render


class SizingError(ValueError):
    """Bad or out-of-model input.

    ``field`` and ``message`` describe the first problem; ``errors`` lists every problem
    found as ``(field, message)`` pairs in English (dotted paths such as
    ``"model.architecture.vocab_size"``); ``codes`` lists the same problems as
    ``(field, Msg)`` so each can be rendered in the customer's language.
    """

    def __init__(
        self,
        field: str,
        message: Msg,
        *,
        errors: list[tuple[str, Msg]] | None = None,
    ) -> None:
        self.codes: list[tuple[str, Msg]] = list(errors) if errors else [(field, message)]
        self.errors: list[tuple[str, str]] = [(f, render(m)) for f, m in self.codes]
        self.field, self.message = self.errors[0]
        super().__init__(f"{self.field}: {self.message}")

    @classmethod
    def many(cls, errors: list[tuple[str, Msg]]) -> SizingError:
        field, msg = errors[0]
        return cls(field, msg, errors=errors)

    def as_dict(self, translate: Translate | None = None) -> dict[str, list[dict[str, Any]]]:
        return {
            "errors": [
                {
                    "field": f,
                    "message": render(m, translate),
                    "code": m.code,
                    "params": m.as_dict()["params"],
                }
                for f, m in self.codes
            ]
        }
