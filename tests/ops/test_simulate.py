"""A small run of ``python -m app simulate``: it finishes and the ledger reconciles."""

from __future__ import annotations

from pathlib import Path


def test_simulate_small_run_passes_the_ledger_check(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from app.__main__ import main

    url = f"sqlite:///{tmp_path / 'sim.db'}"
    code = main(
        ["simulate", "--seed", "3", "--customers", "10", "--days", "40", "--database-url", url]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "day  40/40" in out  # progress as it goes
    for label in ("orders", "refunds", "revenue", "late rate", "ledger check"):
        assert label in out
    assert "FAIL" not in out
    assert "delivered" in out and "renewals" in out


def test_simulate_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    from app.db import make_engine
    from app.main import import_models
    from app.migrate import upgrade
    from app.orders.simulate import Simulation

    import_models()
    results = []
    for run in ("a", "b"):
        url = f"sqlite:///{tmp_path / f'{run}.db'}"
        upgrade(url)
        engine = make_engine(url)
        stats = Simulation(engine, seed=7, customers=4, days=15, out=lambda _l: None).run()
        engine.dispose()
        results.append((stats.orders, stats.paid, stats.delivered, stats.refunds, stats.renewals))
    assert results[0] == results[1]
