"""The catalog pages over HTTP, in English and Chinese."""

from __future__ import annotations

import re

import pytest

LANGS = ["en", "zh_CN"]


@pytest.fixture(params=LANGS)
def lang(request: pytest.FixtureRequest, client) -> str:  # type: ignore[no-untyped-def]
    client.cookies.set("lang", request.param)
    return str(request.param)


def test_nodes_table(client, seeded, lang) -> None:  # type: ignore[no-untyped-def]
    r = client.get("/nodes")
    assert r.status_code == 200
    t = r.text
    for name in ("HGX H100", "HGX H200", "HGX B200", "HGX B300", "MI355X", "GB300 NVL72"):
        assert name in t
    assert "$34,900.00" in t and "$5.98" in t  # B200 list price and 24/7 rate
    assert "2,250" in t and "4,500" in t and "179.1 GiB" in t
    assert '<sup class="src"' in t
    assert 'datetime="2026-12-04"' in t  # B200: 2 in stock, 3 business days from Tue 1 Dec
    if lang == "en":
        assert (
            "Compare nodes" in t
            and "Talk to sales" in t
            and "2 in stock, ready in 3 business days" in t
        )
    else:
        assert "比较节点" in t and "联系销售" in t and "现货 2 台" in t


def test_promise_uses_the_customer_time_zone(client, seeded) -> None:  # type: ignore[no-untyped-def]
    client.cookies.set("tz", "Pacific/Auckland")
    assert 'datetime="2026-12-05"' in client.get("/nodes").text  # noon UTC is 01:00 next day there


def test_node_page(client, seeded, lang) -> None:  # type: ignore[no-untyped-def]
    r = client.get("/nodes/hgx-b200")
    assert r.status_code == 200
    t = r.text
    assert 'href="/deploy?sku=hgx-b200&amp;nodes=1"' in t and 'href="/size?sku=hgx-b200"' in t
    assert "nvidia-smi topo -m" in t and "830 GB/s" in t
    assert "Ubuntu 22.04" in t and "Ubuntu 24.04" in t
    assert "30.7 TB" in t  # 8 × 3.84 TB ≈ 30 TB raw NVMe
    if lang == "en":
        assert "not backed up unless agreed in writing" in t
        assert "private network" in t
        assert re.search(r"about \d+ billion parameters", t)  # what fits, from the engine
    else:
        assert "除非另有书面约定" in t and "私有网络" in t
        # Chinese counts in 亿 (1e8): "约为 900 亿参数", never "90 十亿"
        assert re.search(r"约为 [\d,]+ 亿参数", t) and "十亿" not in t


def test_node_page_shows_the_engines_sustained_mfu_per_stack(client, seeded, lang) -> None:  # type: ignore[no-untyped-def]
    """One truth: the node page quotes the MFU the sizing engine predicts (what the /size
    cards show) for its reference job under each stack, with the release it assumes, not
    the catalog's flat 40 %."""
    from app.sizing import REFERENCE_JOB, reference_mfu, size
    from app.web.templating import format_number

    t = client.get("/nodes/hgx-h100").text
    assert "we assume" not in t and "我们假设" not in t
    for fw, release in (
        ("megatron", "Megatron-Core 0.19 with Transformer Engine"),
        ("fsdp2", "PyTorch 2.11 FSDP2 with torchtitan 0.3"),
    ):
        mfu = reference_mfu("hgx-h100", fw)
        assert mfu is not None and mfu != 0.40
        card = size({**REFERENCE_JOB, "sku": "hgx-h100", "nodes": 1, "framework": fw})
        assert card["options"][0]["mfu"] == mfu  # the same figure as the sizing answer's card
        figure = f'<span class="pct">{format_number(mfu * 100)} %</span>'
        assert f"{release}: {figure}" in t or f"{release}：{figure}" in t
    if lang == "en":
        assert "Sustained MFU the sizing engine predicts" in t and "Llama 3.1 8B" in t
    else:
        assert "配置估算引擎预测的持续算力利用率" in t and "参考任务" in t


def test_mi355x_runs_rocm(client, seeded) -> None:  # type: ignore[no-untyped-def]
    t = client.get("/nodes/mi355x").text
    assert (
        "ROCm" in t
        and "rocm-smi --showtopo" in t
        and "CUDA" not in t.split("<main")[1].split("Images")[1][:400]
    )


def test_rack_page_is_talk_to_sales(client, seeded, lang) -> None:  # type: ignore[no-untyped-def]
    t = client.get("/nodes/gb300-nvl72").text
    assert "/deploy?sku=gb300-nvl72" not in t
    assert 'href="/cluster-request?sku=gb300-nvl72&amp;nodes=1&amp;months=12"' in t
    assert "$7,990.00" in t


def test_rack_link_and_network_read_in_the_reader_s_language(client, seeded, lang) -> None:  # type: ignore[no-untyped-def]
    for url in ("/nodes", "/nodes/gb300-nvl72"):
        t = client.get(url).text
        if lang == "en":
            assert "NVLink 5 (130 TB/s per rack)" in t and "800G per GPU" in t
        else:
            assert "NVLink 5（整机柜 130 TB/s）" in t and "每张 GPU 800G" in t
            assert "per rack" not in t and "800G per GPU" not in t


def test_a_zone_whose_name_is_its_label_is_named_once(client, seeded) -> None:  # type: ignore[no-untyped-def]
    client.cookies.set("tz", "UTC")
    assert "UTC (UTC)" not in client.get("/nodes").text


def test_unknown_node_is_404(client, lang) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/nodes/h9000").status_code == 404


def test_monthly_vs_hourly_defaults_to_the_b200_example(client, seeded, lang) -> None:  # type: ignore[no-untyped-def]
    r = client.get("/pricing/monthly-vs-hourly")
    assert r.status_code == 200
    t = r.text
    assert "$60.59" in t and "$5.98" in t
    assert "<svg" in t and "<desc" in t
    assert 'placeholder="5.99"' in t


def test_monthly_vs_hourly_inputs(client, seeded) -> None:  # type: ignore[no-untyped-def]
    r = client.get("/pricing/monthly-vs-hourly?sku=hgx-b200&hours=730&hourly=7.00")
    assert 'id="mvh-effective">US$5.98' in r.text
    assert "hourly stays cheaper" not in r.text
    frag = client.get(
        "/pricing/monthly-vs-hourly?sku=hgx-b200&hours=72", headers={"HX-Request": "true"}
    )
    assert frag.status_code == 200 and "<html" not in frag.text and "$60.59" in frag.text
    bad = client.get("/pricing/monthly-vs-hourly?sku=zzz&hours=1000&hourly=abc")
    assert bad.status_code == 422
    assert 'id="e-hours"' in bad.text and 'id="e-hourly"' in bad.text and 'value="1000"' in bad.text


def test_list_price_change_shows_on_the_pages(client, seeded, make_user, login) -> None:  # type: ignore[no-untyped-def]
    login(client, make_user("ops"))
    client.post("/staff/prices/hgx-b200", data={"price": "36,000", "reason": "market"})
    assert "$36,000.00" in client.get("/nodes/hgx-b200").text
