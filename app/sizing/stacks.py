"""The training stacks by name, and the releases the engine's figures assume.

One home for what the answer's assumptions, the node pages, the configurator's cards and
the launch-file exporters (app/sizing/launch/) say about a stack: its display name and the
release whose behaviour the memory and time figures describe (the newest stable ones). The
exporters write files for exactly these releases, so the two never disagree.
"""

from __future__ import annotations

PYTORCH = "2.11"
MEGATRON_CORE = "0.19.0"  # Megatron-LM tag core_r0.19.0
TORCHTITAN = "0.3.0"
DEEPSPEED = "0.19.8"
ACCELERATE = "1.15.0"

# the request's ``framework`` -> its name on pages (a product name: not translated)
NAMES: dict[str, str] = {
    "megatron": "Megatron-Core",
    "fsdp2": "PyTorch FSDP2",
    "deepspeed": "DeepSpeed",
    "hf": "HF Accelerate",
}


def _minor(version: str) -> str:
    """ "0.19.0" -> "0.19": the release line a reader knows."""
    return ".".join(version.split(".")[:2])


# the request's ``framework`` -> the release the figures assume (a product name: not
# translated; the sentence around it is)
RELEASES: dict[str, str] = {
    "megatron": f"Megatron-Core {_minor(MEGATRON_CORE)} with Transformer Engine",
    "fsdp2": f"PyTorch {PYTORCH} FSDP2 with torchtitan {_minor(TORCHTITAN)}",
    "deepspeed": f"DeepSpeed {DEEPSPEED} on PyTorch {PYTORCH}",
    "hf": f"HF Accelerate {_minor(ACCELERATE)} on PyTorch {PYTORCH}",
}
