"""Pure loader for the node catalog data file (standard library only).

The data file ``catalog.json`` beside this module holds every figure of the catalog
with its source class. List prices in the file are the *seed*; the live list price
is kept in the database (staff can change it) and passed to pure code explicitly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

CATALOG_PATH = Path(__file__).with_name("catalog.json")

GIB = 1024**3
GB = 1000**3

# The one self-serve limit: more nodes than this in one order is a sales conversation
# (a cluster request). Used by the sizing engine, /deploy, the orders API and quotes.
SELF_SERVE_MAX_NODES = 16


@dataclass(frozen=True)
class NodeSpec:
    """One SKU's published figures (a node of ``gpus_per_node`` GPUs)."""

    id: str
    name: str
    vendor: str
    gpus_per_node: int
    gpu_memory_gb: float
    usable_gpu_memory_gib: float
    node_ram_tb: float | None
    bf16_dense_tflops: float
    fp8_dense_tflops: float
    intra_link: str
    intra_link_gbps_per_gpu: float
    nics: str
    nvme_drives: int | None
    nvme_drive_tb: float | None
    egress_tb_month: float | None
    list_price_cents_month: int
    hourly_elsewhere_cents_per_gpu_hour: int
    default_mfu: float
    mfu_source: str
    images: tuple[str, ...]
    self_serve: bool
    lead_time_business_days: int | None
    # time-model facts: dense FP4 (None = no FP4 tensor cores), HBM TB/s, network Gbit/s
    fp4_dense_tflops: float | None = None
    hbm_tbps: float = 0.0
    nic_gbps_per_gpu: float = 0.0
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def usable_gpu_memory_bytes(self) -> int:
        return int(self.usable_gpu_memory_gib * GIB)

    @property
    def node_ram_bytes(self) -> int | None:
        return None if self.node_ram_tb is None else int(self.node_ram_tb * 1000**4)

    @property
    def nvme_bytes(self) -> int | None:
        if self.nvme_drives is None or self.nvme_drive_tb is None:
            return None
        return int(self.nvme_drives * self.nvme_drive_tb * 1000**4)

    @property
    def price_per_gpu(self) -> bool:
        """True for rack offers priced per GPU per month (GB300 NVL72)."""
        return self.raw.get("list_price_unit") == "per_gpu"

    def source(self, key: str) -> str:
        """Source class of a figure, e.g. ``source("list_price")`` → ``"E"``."""
        return str(self.raw.get(f"{key}_source", "-"))


@dataclass(frozen=True)
class ImageSpec:
    id: str
    name: str
    vendor: str


def _spec(d: dict[str, Any]) -> NodeSpec:
    return NodeSpec(
        id=d["id"],
        name=d["name"],
        vendor=d["vendor"],
        gpus_per_node=int(d["gpus_per_node"]),
        gpu_memory_gb=float(d["gpu_memory_gb"]),
        usable_gpu_memory_gib=float(d["usable_gpu_memory_gib"]),
        node_ram_tb=None if d.get("node_ram_tb") is None else float(d["node_ram_tb"]),
        bf16_dense_tflops=float(d["bf16_dense_tflops"]),
        fp8_dense_tflops=float(d["fp8_dense_tflops"]),
        intra_link=d["intra_link"],
        intra_link_gbps_per_gpu=float(d["intra_link_gbps_per_gpu"]),
        nics=d["nics"],
        nvme_drives=d.get("nvme_drives"),
        nvme_drive_tb=d.get("nvme_drive_tb"),
        egress_tb_month=d.get("egress_tb_month"),
        list_price_cents_month=int(d["list_price_cents_month"]),
        hourly_elsewhere_cents_per_gpu_hour=int(d["hourly_elsewhere_cents_per_gpu_hour"]),
        default_mfu=float(d["default_mfu"]),
        mfu_source=d["mfu_source"],
        images=tuple(d["images"]),
        self_serve=bool(d["self_serve"]),
        lead_time_business_days=d.get("lead_time_business_days"),
        fp4_dense_tflops=None
        if d.get("fp4_dense_tflops") is None
        else float(d["fp4_dense_tflops"]),
        hbm_tbps=float(d.get("hbm_tbps") or 0.0),
        nic_gbps_per_gpu=float(d.get("nic_gbps_per_gpu") or 0.0),
        raw=d,
    )


@lru_cache(maxsize=1)
def _load() -> tuple[tuple[NodeSpec, ...], tuple[ImageSpec, ...]]:
    data = json.loads(CATALOG_PATH.read_text(encoding="utf-8"))
    skus = tuple(_spec(d) for d in data["skus"])
    images = tuple(ImageSpec(**i) for i in data["images"])
    return skus, images


def all_specs() -> tuple[NodeSpec, ...]:
    return _load()[0]


def spec(sku_id: str) -> NodeSpec:
    for s in all_specs():
        if s.id == sku_id:
            return s
    raise KeyError(sku_id)


def all_images() -> tuple[ImageSpec, ...]:
    return _load()[1]


def image_fits(sku_id: str, image_id: str) -> bool:
    return image_id in spec(sku_id).images
