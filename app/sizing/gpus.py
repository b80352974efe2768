"""One GPU's facts for the time model: its dense peaks, HBM, NVLink and network bandwidth,
and the share of its datasheet peak its family sustains (a catalog SKU or a calibration
table's GPU). The one peak-FLOPs rule of the engine lives here."""

from __future__ import annotations

from dataclasses import dataclass

from app.catalog.specs import NodeSpec


def dense_peak_tflops(precision: str, bf16: float, fp8: float, fp4: float | None) -> float:
    """The engine's one peak-FLOPs rule: the dense tensor-core peak of the training
    precision (FP4 only where the GPU has FP4 tensor cores)."""
    if precision == "fp8":
        return fp8
    if precision == "fp4":
        if not fp4:
            raise ValueError("no FP4 dense peak on this GPU")
        return fp4
    return bf16


@dataclass(frozen=True)
class Hardware:
    """One GPU's facts (catalog or calibration table)."""

    bf16_tflops: float
    fp8_tflops: float
    fp4_tflops: float | None
    hbm_tbps: float
    nvlink_gbps: float  # GB/s per GPU, bidirectional (the catalog's convention)
    nic_gbps: float  # Gbit/s per GPU
    nvlink_domain: int  # GPUs that share NVLink (8 on HGX, 72 on an NVL72 rack)
    # share of the datasheet's tensor-core peaks this GPU family sustains in training,
    # relative to the Ampere/Hopper parts E_GEMM and E_ATTN were fitted on (PEAK_SHARE)
    peak_share: float = 1.0

    def peak(self, precision: str) -> float:
        """The datasheet's dense peak (what MFU is quoted against)."""
        return dense_peak_tflops(precision, self.bf16_tflops, self.fp8_tflops, self.fp4_tflops)

    def sustained(self, precision: str) -> float:
        """The peak the time model prices GEMMs and attention from (TFLOP/s)."""
        return self.peak(precision) * self.peak_share


# Share of the datasheet's dense peaks a GPU family sustains in training relative to the
# Ampere/Hopper parts the hardware model's efficiencies were fitted on. Fitted on the 2025
# rows that ran one stack on several families (MLPerf Training v5.0/v5.1 NVIDIA and AMD
# submissions; Megatron-MoE-ModelZoo's GB200/GB300 rows; bench/data): under one FP8 share,
# Hopper's rows came out about 20 % too slow while Blackwell's and AMD's were right — newer
# parts quote peaks at clocks their power caps do not hold under dense tensor-core work.
PEAK_SHARE = {"ampere": 1.0, "hopper": 1.0, "blackwell": 0.85, "cdna": 0.82}


def gpu_family(gpu: str) -> str:
    """The family of a GPU by its name (catalog ``gpu`` field or a calibration table's key):
    A100 → ampere, H100/H200/H800/H20 → hopper, B200/B300/GB200/GB300 → blackwell,
    MI300X/MI325X/MI355X → cdna."""
    g = gpu.strip().upper()
    if g.startswith("MI"):
        return "cdna"
    if g.startswith(("B", "GB")):
        return "blackwell"
    if g.startswith("A"):
        return "ampere"
    return "hopper"


def hardware_from_spec(spec: NodeSpec) -> Hardware:
    """A catalog SKU as time-model hardware (its NVLink domain is the node or rack)."""
    return Hardware(
        bf16_tflops=spec.bf16_dense_tflops,
        fp8_tflops=spec.fp8_dense_tflops,
        fp4_tflops=spec.fp4_dense_tflops,
        hbm_tbps=spec.hbm_tbps or 3.35,
        nvlink_gbps=spec.intra_link_gbps_per_gpu,
        nic_gbps=spec.nic_gbps_per_gpu or 400.0,
        nvlink_domain=spec.gpus_per_node,
        peak_share=PEAK_SHARE[gpu_family(str(spec.raw.get("gpu") or spec.name))],
    )
