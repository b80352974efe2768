"""Find English left on a page that should be in another language.

``english_sentences(html)`` returns every run of three or more consecutive Latin words in
the page's rendered text (what a reader sees: not tags, attributes, scripts or styles),
ignoring an allow-list of product names, units and commands, and text inside ``<code>``,
``<pre>``, ``<kbd>``, ``<samp>`` or an element marked ``translate="no"``.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

# Product and model names, units, currencies, protocols and commands: the same in Chinese.
ALLOWED_WORDS = frozenset(
    [
        "GPU",
        "GPUs",
        "NVIDIA",
        "AMD",
        "HGX",
        "DGX",
        "H100",
        "H200",
        "B200",
        "B300",
        "GB300",
        "NVL72",
        "MI300X",
        "MI325X",
        "MI355X",
        "NVLink",
        "NVSwitch",
        "InfiniBand",
        "Infinity",
        "Fabric",
        "RoCE",
        "Ethernet",
        "ConnectX",
        "ConnectX-7",
        "ConnectX-8",
        "BlueField",
        "Ubuntu",
        "CUDA",
        "ROCm",
        "Linux",
        "SSH",
        "ssh",
        "ubuntu",
        "root",
        "NVMe",
        "SSD",
        "TB",
        "GB",
        "GiB",
        "TiB",
        "MB",
        "PB",
        "TFLOPS",
        "PFLOPS",
        "BF16",
        "FP8",
        "FP16",
        "FP32",
        "FP4",
        "TF32",
        "US",
        "USD",
        "BTC",
        "ETH",
        "USDT",
        "USDC",
        "Bitcoin",
        "Ethereum",
        "Lightning",
        "BTCPay",
        "IP",
        "IPv4",
        "IPv6",
        "SHA256",
        "ed25519",
        "rsa",
        "ecdsa",
        "ssh-ed25519",
        "ssh-rsa",
        "PDF",
        "UTC",
        "API",
        "LLM",
        "Llama",
        "Qwen",
        "DeepSeek",
        "Mixtral",
        "Mistral",
        "GPT",
        "Gemma",
        "MoE",
        "DP",
        "TP",
        "PP",
        "EP",
        "ZeRO",
        "FSDP",
        "NCCL",
        "RCCL",
        "Megatron",
        "DeepSpeed",
        "PyTorch",
        "JAX",
        "Container",
        "Toolkit",
        "Docker",
        "HTTP",
        "HTTPS",
        "URL",
        "JSON",
        "CSV",
        "htmx",
        "English",
        "Gbps",
        "GB/s",
        "Tbps",
        "Gb/s",
        "s",
        "h",
        "kW",
        "W",
    ]
)

_SKIP = {"script", "style", "code", "pre", "kbd", "samp", "template", "svg", "head"}
_VOID = {"br", "hr", "img", "input", "meta", "link", "wbr", "area", "base", "col", "source"}
# A word: Latin letters, possibly with digits, apostrophes, dots or dashes inside.
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9'’./_-]*[A-Za-z0-9]|[A-Za-z]|[^\sA-Za-z]")
# Between two words of one run: only spaces and light punctuation.
_JOINER = re.compile(r"^[,;:()“”\"'·&–—-]$")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []
        self.chunks: list[str] = []

    def _skipping(self) -> bool:
        return any(skip for _tag, skip in self.stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            self.chunks.append("\n")
            return
        skip = tag in _SKIP or dict(attrs).get("translate") == "no"
        self.stack.append((tag, skip))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break
        self.chunks.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping():
            self.chunks.append(data)


def visible_text(html: str) -> str:
    p = _Text()
    p.feed(html)
    p.close()
    return "".join(p.chunks)


def english_sentences(html: str, allowed: frozenset[str] = ALLOWED_WORDS) -> list[str]:
    """Runs of 3+ consecutive Latin words (outside the allow-list) in the rendered text."""
    found: list[str] = []
    for line in visible_text(html).split("\n"):
        run: list[str] = []
        for tok in _TOKEN.findall(line):
            if tok[0].isascii() and tok[0].isalpha():
                bare = tok.rstrip(".")
                if bare in allowed or tok in allowed:
                    run = _flush(run, found)
                else:
                    run.append(tok)
            elif _JOINER.match(tok) and run:
                continue
            else:
                run = _flush(run, found)
        _flush(run, found)
    return found


def _flush(run: list[str], found: list[str]) -> list[str]:
    if len(run) >= 3:
        found.append(" ".join(run))
    return []
