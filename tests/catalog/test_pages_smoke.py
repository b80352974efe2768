import pytest


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
@pytest.mark.parametrize(
    "path",
    [
        "/nodes",
        "/nodes/hgx-b200",
        "/nodes/mi355x",
        "/nodes/gb300-nvl72",
        "/nodes/gb300-nvl72/request",
        "/pricing/monthly-vs-hourly",
    ],
)
def test_smoke(client, seeded, path, lang):
    client.cookies.set("lang", lang)
    r = client.get(path)
    assert r.status_code == 200, r.text[:3000]


def test_staff_smoke(client, seeded, make_user, login):
    login(client, make_user("ops"))
    r = client.get("/staff/nodes")
    assert r.status_code == 200, r.text[:3000]
    r = client.post("/staff/prices/hgx-b200", data={"price": "36000", "reason": "test"})
    assert r.status_code == 303, r.text[:3000]
    r = client.get("/staff/nodes")
    assert "36,000" in r.text
