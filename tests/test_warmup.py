"""A worker warms the engine and freezes its start-up heap before it serves."""

from __future__ import annotations

import gc

from app import main, warmup


def test_warm_process_freezes_what_the_process_keeps() -> None:
    before = gc.get_freeze_count()
    try:
        warmup.warm_process()
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()


def test_a_failed_warm_up_does_not_stop_the_worker(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from app import sizing

    def broken(_req: object) -> object:
        raise RuntimeError("catalog unreachable")

    monkeypatch.setattr(sizing, "size", broken)
    try:
        warmup.warm_process()  # logs, freezes, returns
    finally:
        gc.unfreeze()


def test_the_server_factory_warms_each_worker(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    calls: list[str] = []
    monkeypatch.setattr(main, "create_app", lambda settings: calls.append("app") or "app")
    monkeypatch.setattr(main, "warm_process", lambda: calls.append("warm"))
    assert main.asgi() == "app"
    assert calls == ["app", "warm"]
