"""/size's "Launch config": a link per card, the files page, downloads, refusals (EN/ZH)."""

from __future__ import annotations

import html as htmllib
import re
from urllib.parse import parse_qs, urlencode, urlsplit

from fastapi.testclient import TestClient
from markupsafe import escape

Q = "model=llama-3.1-70b&tokens=2e12&sku=hgx-h100&nodes=4&par=explicit&sharding=zero1&tp=8&pp=2"


def _page(client: TestClient, framework: str, **extra: str) -> str:
    r = client.get(
        "/size/launch?" + urlencode({"q": Q, "option": "0", "framework": framework, **extra})
    )
    return r.text if r.status_code == 200 else f"{r.status_code}\n{r.text}"


def test_each_fitting_card_links_to_its_launch_files_in_the_request_framework(
    client: TestClient,
) -> None:
    html = client.get("/size?model=llama-3.1-8b&tokens=1e11", headers={"HX-Request": "true"}).text
    links = re.findall(r'<p class="launch"><a href="(/size/launch\?[^"]*)">', html)
    fitting = len(re.findall(r'<article class="card sku-card fits', html))
    assert links and len(links) == fitting, (len(links), fitting)
    for i, link in enumerate(links):
        assert link.endswith(f"&amp;option={i}")
        page = client.get(htmllib.unescape(link))
        assert page.status_code == 200
        # no framework in the link: the page opens on the request's (fsdp2 -> torchtitan)
        # and its own form switches it
        assert '<option value="torchtitan" selected>' in page.text
        assert "launch_job.py" in page.text


def test_files_page_shows_every_file_with_download_and_copy(client: TestClient) -> None:
    card = client.get("/size?" + Q, headers={"HX-Request": "true"}).text
    link = htmllib.unescape(re.search(r'<p class="launch"><a href="([^"]*)"', card).group(1))
    q = parse_qs(urlsplit(link).query)["q"][0]
    r = client.get("/size/launch?" + urlencode({"q": q, "option": "0", "framework": "torchtitan"}))
    assert r.status_code == 200
    html = r.text
    assert "style=" not in html  # CSP
    names = re.findall(r"<h2 id=\"lf-h-\d+\"><code>([^<]+)</code></h2>", html)
    assert names == ["launch_job.py", "launch.sh"]
    for name in names:
        link = re.search(r'href="(/size/launch/file\?[^"]*name=' + re.escape(name) + ')"', html)
        assert link
        d = client.get(htmllib.unescape(link.group(1)))
        assert d.status_code == 200
        assert d.headers["content-disposition"] == f'attachment; filename="{name}"'
        assert str(escape(d.text)) in html  # the preview is the file
    job = client.get(
        htmllib.unescape(
            re.search(r'href="(/size/launch/file\?[^"]*name=launch_job.py)"', html).group(1)
        )
    ).text
    assert "par.tensor_parallel_degree = 8" in job and "par.pipeline_parallel_degree = 2" in job
    assert 'data-copy="#lf-0"' in html


def test_refusal_is_422_in_chinese_with_links_to_who_can(client: TestClient) -> None:
    client.cookies.set("lang", "zh_CN")
    r = client.get("/size/launch?" + urlencode({"q": Q, "option": "0", "framework": "accelerate"}))
    client.cookies.delete("lang")
    assert r.status_code == 422
    assert "张量并行 8" in r.text and "可以运行此布局的框架：" in r.text
    assert "framework=torchtitan" in r.text and "framework=megatron" in r.text


def test_bad_inputs_are_clear_errors_not_500(client: TestClient) -> None:
    for params in (
        {"q": Q, "option": "x"},
        {"q": Q, "option": "99"},
        {"q": Q, "option": "\u0663"},  # Arabic-Indic 3: the rest of the site refuses it
        {"q": Q, "option": "\uff12"},  # full-width 2
        {"q": Q, "option": "0", "framework": "jax"},
        {"q": "model=llama-3.1-70b&tokens=-1", "option": "0"},
    ):
        r = client.get("/size/launch?" + urlencode(params))
        assert r.status_code == 422, (params, r.status_code)
    r = client.get(
        "/size/launch/file?"
        + urlencode({"q": Q, "option": "0", "framework": "torchtitan", "name": "../etc"})
    )
    assert r.status_code == 422
