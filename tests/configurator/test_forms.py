"""Query-string parsing for /size: friendly numbers in, an engine request out."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.configurator import forms
from app.configurator.forms import FieldError, parse_amount, parse_percent, parse_query

PRESETS = frozenset({"llama-3.1-8b", "llama-3.1-70b"})


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1T", 1e12),
        ("300B", 300e9),
        ("300b", 300e9),
        ("2e12", 2e12),
        ("1,000,000", 1e6),
        ("7.5 B", 7.5e9),
        ("15T tokens", 15e12),
        ("70B params", 70e9),
        ("500M", 500e6),
        ("4k", 4e3),
    ],
)
def test_friendly_amounts(text: str, value: float) -> None:
    assert parse_amount(text) == pytest.approx(value)


def test_context_k_is_binary() -> None:
    assert parse_amount("4k", binary_k=True) == 4096
    assert parse_amount("128K", binary_k=True) == 131072


# the last: 16 KB of digits and one letter (a request head's worth), refused at once; the
# pattern alone backtracked over it for seconds
@pytest.mark.parametrize(
    "text", ["", "abc", "1TT", "-5", "1e999999", "nan", "inf", "½", "9" * 16_000 + "!"]
)
def test_bad_amounts_are_rejected(text: str) -> None:
    with pytest.raises(FieldError):
        parse_amount(text)


@pytest.mark.parametrize(("text", "value"), [("40", 0.4), ("45 %", 0.45), ("0.5", 0.5)])
def test_percent(text: str, value: float) -> None:
    assert parse_percent(text) == pytest.approx(value)


# other scripts' digits and superscripts are refused as in every other number field
@pytest.mark.parametrize("text", ["0", "101", "abc", "-3", "٣", "৩", "²", "nan", "inf"])
def test_bad_percent(text: str) -> None:
    with pytest.raises(FieldError):
        parse_percent(text)


@pytest.mark.parametrize("sku", ["\x00x", "hgx-h999", "x" * 5000])
def test_an_unknown_node_is_the_selects_error_not_an_echo(sku: str) -> None:
    f = parse_query({"model": "llama-3.1-8b", "tokens": "1T", "sku": sku}, PRESETS)
    assert not f.ok and f.errors == {"sku": forms.E_CHOICE}
    assert parse_query({"model": "llama-3.1-8b", "tokens": "1T", "sku": "hgx-b200"}, PRESETS).ok


def test_a_parameter_count_below_the_engines_floor_gets_the_forms_words() -> None:
    f = parse_query({"model": "params", "params": "5", "tokens": "1T"}, PRESETS)
    assert not f.ok and f.errors == {"params": forms.E_AT_LEAST}
    assert f.error_params["params"] == {"min": "1M"}
    assert parse_query({"model": "params", "params": "1M", "tokens": "1T"}, PRESETS).ok


def test_empty_query_gets_defaults_and_a_request() -> None:
    f = parse_query({}, PRESETS)
    assert f.ok
    assert f.request == {
        "model": {"preset": "llama-3.1-8b"},
        "tokens": 1e12,
        "seq_len": 4096,
        "micro_batch_size": 1,
        "precision": "bf16",
        "method": "full",
    }
    assert "model=llama-3.1-8b" in f.query_string()


def test_params_model_and_every_knob() -> None:
    f = parse_query(
        {
            "model": "params",
            "params": "70B",
            "tokens": "2e12",
            "seq_len": "8k",
            "mbs": "2",
            "precision": "fp8",
            "method": "full",
            "recompute": "selective",
            "par": "explicit",
            "sharding": "zero3",
            "shard_group": "8",
            "tp": "2",
            "pp": "1",
            "mfu": "45%",
            "sku": "hgx-h100",
            "nodes": "4",
        },
        PRESETS,
    )
    assert f.ok, f.errors
    r = f.request
    assert r is not None
    assert r["model"] == {"params": 70e9}
    assert r["seq_len"] == 8192
    assert r["micro_batch_size"] == 2
    assert r["recompute"] == "selective"
    assert r["parallelism"] == {"sharding": "zero3", "shard_group": 8, "tp": 2, "pp": 1}
    assert r["mfu"] == pytest.approx(0.45)
    assert r["sku"] == "hgx-h100" and r["nodes"] == 4


def test_architecture_model() -> None:
    f = parse_query(
        {
            "model": "arch",
            "vocab_size": "32000",
            "hidden_size": "4096",
            "intermediate_size": "11008",
            "num_layers": "32",
            "num_heads": "32",
            "num_kv_heads": "32",
            "tokens": "1T",
        },
        PRESETS,
    )
    assert f.ok, f.errors
    assert f.request is not None
    arch = f.request["model"]["architecture"]
    assert arch["num_attention_heads"] == 32 and arch["tie_embeddings"] is False


def test_errors_name_their_fields_and_keep_what_was_typed() -> None:
    f = parse_query(
        {"model": "params", "params": "lots", "tokens": "", "mfu": "150", "method": "x"},
        PRESETS,
    )
    assert not f.ok and f.request is None
    assert set(f.errors) == {"params", "tokens", "mfu", "method"}
    assert f.values["params"] == "lots" and f.values["mfu"] == "150"


def test_partial_moe_is_an_error() -> None:
    f = parse_query(
        {
            "model": "arch",
            "vocab_size": "32000",
            "hidden_size": "4096",
            "intermediate_size": "11008",
            "num_layers": "32",
            "num_heads": "32",
            "num_kv_heads": "8",
            "num_experts": "8",
            "tokens": "1T",
        },
        PRESETS,
    )
    assert "experts_per_token" in f.errors and "expert_intermediate_size" in f.errors


def test_unknown_model_is_an_error() -> None:
    f = parse_query({"model": "gpt-17", "tokens": "1T"}, PRESETS)
    assert "model" in f.errors


def test_human_count() -> None:
    assert forms.human_count(8_030_261_248) == "8.0B"
    assert forms.human_count(1e12) == "1T"
    assert forms.human_count(405e9) == "405B"


@given(st.dictionaries(st.sampled_from(forms.FIELDS), st.text(max_size=60), max_size=12))
def test_parse_query_never_raises(q: dict[str, str]) -> None:
    f = parse_query(q, PRESETS)
    assert f.ok or f.errors
    for v in f.values.values():
        assert len(v) <= forms.MAX_VALUE_LEN


def test_global_batch_is_optional_and_checked() -> None:
    """Empty: the engine prices the run's compute-optimal batch; a number is sequences per
    optimizer step within the API's bounds; anything else is an error at the field."""
    assert "global_batch_size" not in (
        parse_query({"model": "llama-3.1-8b", "tokens": "1T"}, PRESETS).request or {}
    )
    f = parse_query({"model": "llama-3.1-8b", "tokens": "1T", "gbs": "１０２４"}, PRESETS)
    assert f.ok and f.request is not None and f.request["global_batch_size"] == 1024
    assert "gbs=" in f.query_string()
    for bad in ("0", "-5", "1e30", "lots", "2.5", str(1 << 30)):
        g = parse_query({"model": "llama-3.1-8b", "tokens": "1T", "gbs": bad}, PRESETS)
        assert not g.ok and set(g.errors) == {"gbs"}, bad


def test_the_training_stack_reaches_the_engine_and_stays_in_the_link() -> None:
    form = parse_query({"model": "llama-3.1-8b", "tokens": "1T", "framework": "megatron"}, PRESETS)
    assert form.ok and form.request is not None
    assert form.request["framework"] == "megatron"
    assert "framework=megatron" in form.query_string()
    # left empty: the engine's own default, and the link does not pin one
    plain = parse_query({"model": "llama-3.1-8b", "tokens": "1T"}, PRESETS)
    assert plain.request is not None and "framework" not in plain.request
    assert "framework" not in plain.query_string()


@pytest.mark.parametrize("text", ["pytorch", "MEGATRON", "fsdp", "<script>"])
def test_an_unknown_training_stack_is_refused_on_its_field(text: str) -> None:
    form = parse_query({"model": "llama-3.1-8b", "tokens": "1T", "framework": text}, PRESETS)
    assert not form.ok and "framework" in form.errors


def test_torch_compile_reaches_the_engine_and_stays_in_the_link() -> None:
    q = {"model": "llama-3.1-8b", "tokens": "1T", "framework": "fsdp2", "compile": "1"}
    form = parse_query(q, PRESETS)
    assert form.ok and form.request is not None
    assert form.request["compile"] is True
    assert "compile=1" in form.query_string()
    # off is the engine's default: nothing sent, nothing pinned in the link
    for off in ("", "0"):
        plain = parse_query({**q, "compile": off}, PRESETS)
        assert plain.request is not None and "compile" not in plain.request
        assert "compile=1" not in plain.query_string()


@pytest.mark.parametrize("text", ["yes", "true", "2", "１", "<b>"])
def test_a_bad_torch_compile_value_is_refused_on_its_field(text: str) -> None:
    form = parse_query({"model": "llama-3.1-8b", "tokens": "1T", "compile": text}, PRESETS)
    assert not form.ok and "compile" in form.errors and form.request is None


def test_every_field_that_can_be_wrong_has_a_label_for_the_error_summary() -> None:
    """The summary above the results names each wrong field by its label, not its query
    name ("rocm", "compile" were shown raw)."""
    from app.configurator.routes import FIELD_LABELS

    assert set(forms.FIELDS) - {"tie_embeddings"} <= set(FIELD_LABELS)
