"""Find English sentences left on a page that should be in another language.

``english_sentences(html)`` scans the rendered *text* (not attributes, not scripts or
styles, not staff free text marked as the engineer's own words) for three or more consecutive Latin words outside an allow-list of product names,
units, abbreviations and commands. Punctuation such as commas between words keeps a run
going; digits, symbols and CJK characters end it, as do allow-listed words.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

# Names, units and terms of the trade that stay Latin in any language.
_ALLOWED_TEXT = (
    # products, vendors, models
    "HGX NVL NVLink NVIDIA AMD Instinct GB300 B200 B300 H100 H200 MI355X Grace Blackwell "
    "Hopper Llama Meta DeepSeek Mixtral Qwen Mistral Gemma Kimi gpt oss Scout Maverick "
    "Instruct Base Coder MoE Transformer Engine PyTorch Megatron DeepSpeed FSDP torchtitan "
    "torchtune BTCPay Bitcoin Ethereum USDT USDC Lightning Linux Ubuntu Docker Slurm "
    "Kubernetes InfiniBand RoCE RDMA GitHub htmx"
    # techniques and abbreviations
    " ZeRO TP PP EP CP DP SP LoRA QLoRA NF4 AdamW Adam SGD BF16 FP8 FP16 FP32 FP4 NVFP4 "
    "MXFP4 MXFP8 MFU GPU GPUs CPU CPUs RAM HBM NVMe SSD NIC NICs CUDA ROCm NCCL RCCL GQA "
    "MLA MLP FFN SXM PCIe JSON API CLI HTTP HTTPS URL SSH PDF CSV ID IDs FAQ OK "
    "FLOP FLOPs TFLOPS PFLOPS tokens token"
    # units and money
    " GB GiB TB TiB MB MiB PB Gbps GB/s kW W h s ms US USD"
    # commands
    " python pip ssh curl make git"
)
ALLOWED = frozenset(w.lower() for w in _ALLOWED_TEXT.split())

# Staff free text inside a translated sentence (a timeline entry, a notification), marked
# as the engineer's own words by the Chinese catalogue: 工程师原话："…".
STAFF_QUOTE = re.compile(r"工程师原话：“[^”]*(?:”|$)")
_WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")
_NEUTRAL = set(",;:()\"'“”‘’")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self._skip = 0
        self._staff = 0

    _VOID = frozenset({"br", "img", "input", "hr", "meta", "link", "wbr"})

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "template"):
            self._skip += 1
        if self._staff and tag not in self._VOID:
            self._staff += 1
        elif any(name == "data-staff-words" for name, _v in attrs):
            self._staff = 1  # an engineer's own words (app.web.templating.staff_words)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "template") and self._skip:
            self._skip -= 1
        if self._staff and tag not in self._VOID:
            self._staff -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip and not self._staff and data.strip():
            self.chunks.append(STAFF_QUOTE.sub("", data))


def text_chunks(html: str) -> list[str]:
    p = _Text()
    p.feed(html)
    p.close()
    return p.chunks


def _runs(text: str, min_words: int) -> list[str]:
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) >= min_words:
            out.append(" ".join(run))
        run.clear()

    i = 0
    while i < len(text):
        ch = text[i]
        m = _WORD.match(text, i)
        if m:
            word = m.group(0)
            end = m.end()
            # a word glued to digits ("B200", "4k") is a name or a number, not prose
            glued = end < len(text) and text[end].isdigit()
            glued = glued or (i > 0 and text[i - 1].isdigit())
            if glued or word.lower() in ALLOWED:
                flush()
            else:
                run.append(word)
            i = end
            continue
        if ch.isspace() or ch in _NEUTRAL:
            i += 1
            continue
        flush()
        i += 1
    flush()
    return out


def english_sentences(html: str, min_words: int = 3) -> list[str]:
    """Runs of ``min_words`` or more consecutive non-allow-listed Latin words in the text."""
    found: list[str] = []
    for chunk in text_chunks(html):
        found.extend(_runs(chunk, min_words))
    return found
