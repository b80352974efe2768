"""The answer states the framework release its figures assume, and the launch files are
written for that same release (one source: app/sizing/stacks.py)."""

from __future__ import annotations

import pytest

from app.sizing import size
from app.sizing.launch import DEFAULT_FOR, FRAMEWORKS

# what each stack's release line names, and the version its launch files pin
EXPECT = {
    "megatron": ("Megatron-Core 0.19 with Transformer Engine", "core_r0.19"),
    "fsdp2": ("PyTorch 2.11 FSDP2 with torchtitan 0.3", "0.3"),
    "deepspeed": ("DeepSpeed 0.19.8 on PyTorch 2.11", "0.19.8"),
    "hf": ("HF Accelerate 1.15 on PyTorch 2.11", "1.15"),
}


@pytest.mark.parametrize("framework", sorted(EXPECT))
def test_assumptions_name_the_release_the_launch_files_use(framework: str) -> None:
    release, pinned = EXPECT[framework]
    req = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11, "framework": framework}
    en = size(req)
    assert any(release in a and "newest stable release" in a for a in en["assumptions"])
    codes = [a["code"] for a in en["assumption_codes"]] if "assumption_codes" in en else []
    assert not codes or "assumption.release" in codes
    assert FRAMEWORKS[DEFAULT_FOR[framework]][1].startswith(pinned)
    zh = size(req, lang="zh_CN")
    assert any(release in a and "最新稳定版本" in a for a in zh["assumptions"])


def test_a_given_mfu_still_states_the_release() -> None:
    """Memory follows the release too: the line stays when the request pins the MFU."""
    req = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11, "mfu": 0.4}
    assert any("PyTorch 2.11 FSDP2" in a for a in size(req)["assumptions"])
