"""Issue 36: the Chinese quote PDF is set flush left. fpdf2 justifies a multi-line cell by
default, which stretched the few spaces of a Chinese sizing line into huge gaps."""

from __future__ import annotations

import re
import zlib
from datetime import UTC, datetime

import pytest

from app.quotes import pdf as quote_pdf
from app.quotes.models import Quote

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _stretched_gaps(body: bytes) -> list[float]:
    """Every space stretched between two runs of text in the page content streams: a
    justified line with a Unicode font is drawn as ``[(…) -224.09 (…)] TJ``."""
    out = []
    for m in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", body, re.S):
        try:
            data = zlib.decompress(m.group(1))
        except zlib.error:
            continue
        for arr in re.findall(rb"\[(.*?)\]\s*TJ", data, re.S):
            out += [float(v) for v in re.findall(rb"\)\s*(-?[0-9.]+)\s*\(", arr)]
    return out


@pytest.mark.skipif(not quote_pdf.cjk_available(), reason="no CJK font installed")
def test_the_chinese_quote_is_not_justified() -> None:
    q = Quote(
        id=7,
        token="t" * 32,
        created_by_id=1,
        prospect_name="王",
        prospect_email="wang@lab.example",
        prospect_company="实验室",
        sku_id="hgx-h100",
        quantity=4,
        months=3,
        list_unit_price_cents=1_690_000,
        unit_price_cents=1_600_000,
        monthly_total_cents=6_400_000,
        total_cents=19_200_000,
        notes="训练 70B 模型 需要 私有网络 以及 更多 节点 " * 6,
        expires_at=NOW,
        created_at=NOW,
    )
    layout = [
        ("张量并行", "8"),
        ("流水线并行", "1"),
        ("数据并行", "4"),
        ("分片", "FSDP / ZeRO-3（全部分片）"),
    ] * 3
    body = quote_pdf.build_pdf(
        q,
        locale="zh_CN",
        summary={"params_human": "70B", "tokens_human": "1T", "training_days": 30.5},
        sku_name="HGX H100",
        gpus_per_node=8,
        staff_email="sales@example.com",
        now=NOW,
        layout_rows=layout,
    )
    assert body.startswith(b"%PDF")
    assert _stretched_gaps(body) == []  # flush left: no line stretched to the margin
