"""Why a launch configuration is not written: a stable code, a sentence, who can run it."""

from __future__ import annotations

from typing import Any


def N_(template: str) -> str:  # noqa: N802 - the extraction keyword (pages translate it)
    """Marks a refusal's template for translation; returns it unchanged."""
    return template


class LaunchError(Exception):
    """A refusal with a code (for clients), an English template with ``%(name)s``
    parameters (a msgid: pages translate it), and the frameworks that can run the layout."""

    def __init__(
        self,
        code: str,
        template: str,
        params: dict[str, Any] | None = None,
        frameworks: tuple[str, ...] = (),
        *,
        field: str = "framework",
    ) -> None:
        self.field = field  # the input that cannot be honoured: option, framework, request
        self.code = code
        self.template = template
        self.params = dict(params or {})
        self.frameworks = frameworks
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return self.template % self.params if self.params else self.template

    def as_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "code": self.code,
            "message": self.message,
            "params": dict(self.params),
            "frameworks_that_can": list(self.frameworks),
        }


def offload_optimizer_only(code: str, stack: str, others: tuple[str, ...]) -> LaunchError:
    """The refusal of a stack whose offload moves parameters, gradients and optimizer state
    together (FSDP2's CPUOffloadPolicy) for a layout that offloads the optimizer step only."""
    return LaunchError(
        code,
        N_(
            "This layout moves only the optimizer step to CPU memory; %(stack)s offloads "
            "parameters, gradients and optimizer state together, which is another layout "
            "with another speed."
        ),
        {"stack": stack},
        others,
    )
