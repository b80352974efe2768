"""Launch configurations: one option of an answer as files a framework runs (issue 34).

The frameworks' own parsers check the files in ``make check-launch`` (a separate tools
environment with torch); these tests hold what the app itself promises: the files say where
they came from and what the engine predicts, the layout's degrees and batch are the ones in
the files, refusals carry a code and the frameworks that can, and the API and the CLI give
the same bytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.api.launch import router
from app.sizing import size_result
from app.sizing.launch import (
    DEFAULT_FOR,
    FRAMEWORKS,
    LaunchError,
    export_launch,
    export_plan,
    invariants,
    parse_body,
    plan_of,
)
from app.sizing.request import validate

R8 = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11, "seq_len": 4096}
R70 = {"model": {"preset": "llama-3.1-70b"}, "tokens": 2e12, "seq_len": 8192}
# layouts pinned through the request (the engine's own choice moves with its model)
H100 = {"sku": "hgx-h100", "nodes": 4}
TP8 = {**R70, **H100, "parallelism": {"sharding": "zero1", "tp": 8, "pp": 2}}
FSDP = {**R70, **H100, "parallelism": {"sharding": "zero3"}}
HSDP = {**R70, **H100, "parallelism": {"sharding": "zero3", "shard_group": 8}}
MOE = {
    "model": {"preset": "qwen3-30b-a3b"},
    "tokens": 1e12,
    **H100,
    "parallelism": {"sharding": "zero3", "ep": 8},
}


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = FastAPI()
    app.include_router(router)
    return TestClient(app)


def _files(bundle: Any) -> dict[str, str]:
    return {f.name: f.content for f in bundle.files}


def test_every_file_states_version_answer_and_prediction() -> None:
    sreq = validate(R8)
    res = size_result(R8)
    plan = plan_of(sreq, res, 0)
    o = res.options[0]
    for fw in FRAMEWORKS:
        try:
            bundle = export_plan(plan, fw)
        except LaunchError:
            continue
        version = FRAMEWORKS[fw][1]
        for f in bundle.files:
            if f.name.endswith(".json") or f.name == "hostfile":
                continue  # no comments in JSON; the launch script beside it has the header
            assert version in f.content, (fw, f.name)
            assert plan.answer_id in f.content
            assert f"{o.memory.total / 1e9:.1f} GB" in f.content
            tok = o.extra.get("predicted_tokens_per_s_per_gpu")
            if tok is not None:
                assert f"{tok:,.0f} tokens/s per GPU" in f.content


def test_torchtitan_job_has_the_layout_and_batch() -> None:
    bundle = export_launch(TP8, 0, "torchtitan")
    job = _files(bundle)["launch_job.py"]
    p = bundle.plan
    assert p.tp * p.pp * p.cp * p.dp == p.world and not invariants(p)
    assert (p.tp, p.pp, p.nodes) == (8, 2, 4)
    assert f"par.tensor_parallel_degree = {p.tp}" in job
    assert f"par.pipeline_parallel_degree = {p.pp}" in job
    assert p.microbatches >= p.pp
    assert f"par.data_parallel_shard_degree = {p.dp_shard}" in job
    assert f"config.training.global_batch_size = {p.global_batch_size}" in job
    assert 'model_registry("70B")' in job
    compile(job, "launch_job.py", "exec")  # valid Python
    launch = _files(bundle)["launch.sh"]
    if p.nodes > 1:
        assert f"--nnodes={p.nodes}" in launch and "--rdzv_endpoint" in launch
    else:
        assert "--nproc_per_node=" in launch


def test_hosts_fill_the_rendezvous_and_hostfile() -> None:
    plan = plan_of(validate(FSDP), size_result(FSDP), 0)
    hosts = [f"gpu-{n}.example" for n in range(plan.nodes)]
    ds = _files(export_plan(plan, "deepspeed", hosts))
    assert ds["hostfile"] == "".join(f"{h} slots={plan.gpus_per_node}\n" for h in hosts)
    tt = _files(export_plan(plan, "torchtitan", hosts))["launch.sh"]
    assert f'RDZV_HOST="${{RDZV_HOST:-{hosts[0]}}}"' in tt


def test_deepspeed_batch_is_micro_times_accumulation_times_dp() -> None:
    bundle = export_launch(FSDP, 0, "deepspeed")
    cfg = json.loads(_files(bundle)["ds_config.json"])
    p = bundle.plan
    assert cfg["train_batch_size"] == (
        cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * p.dp
    )
    assert cfg["zero_optimization"]["stage"] == 3


def test_accelerate_yaml_is_fsdp2() -> None:
    bundle = export_launch(FSDP, 0, "accelerate")
    cfg = yaml.safe_load(_files(bundle)["accelerate_config.yaml"])
    assert cfg["distributed_type"] == "FSDP"
    assert cfg["fsdp_config"]["fsdp_version"] == 2
    assert cfg["fsdp_config"]["fsdp_reshard_after_forward"] is True
    assert cfg["num_processes"] == bundle.plan.world == 32
    assert "parallelism_config" not in cfg


def test_hybrid_sharding_is_accelerate_parallelism_config_and_refused_by_deepspeed() -> None:
    cfg = yaml.safe_load(_files(export_launch(HSDP, 0, "accelerate"))["accelerate_config.yaml"])
    pc = cfg["parallelism_config"]
    assert (pc["parallelism_config_dp_shard_size"], pc["parallelism_config_dp_replicate_size"]) == (
        8,
        4,
    )
    with pytest.raises(LaunchError) as e:
        export_launch(HSDP, 0, "deepspeed")
    assert e.value.code == "deepspeed_no_hybrid_shard"
    assert "torchtitan" in e.value.frameworks


def test_megatron_script_sets_connections_before_blackwell() -> None:
    bundle = export_launch(TP8, 0, "megatron")
    script = _files(bundle)["launch_megatron.sh"]
    p = bundle.plan
    assert f"--tensor-model-parallel-size {p.tp}" in script
    assert f"--global-batch-size {p.global_batch_size}" in script
    assert ("export CUDA_DEVICE_MAX_CONNECTIONS=1" in script) == (
        not p.blackwell and p.sharding not in ("zero2", "zero3")
    )


@pytest.mark.parametrize("sharding", ["ddp", "zero1", "zero3"])
def test_megatron_optimizer_offload_uses_the_precision_aware_optimizer(sharding: str) -> None:
    # Megatron's validate_args: --optimizer-cpu-offload needs --use-precision-aware-optimizer,
    # which runs only with the distributed optimizer (Megatron-FSDP turns that on itself)
    req = {**R70, **H100, "parallelism": {"sharding": sharding}, "offload_optimizer": True}
    bundle = export_launch(req, 0, "megatron")
    assert bundle.plan.offload_optimizer
    script = _files(bundle)["launch_megatron.sh"]
    assert "--optimizer-cpu-offload" in script
    assert "--use-precision-aware-optimizer" in script
    assert ("--use-distributed-optimizer" in script) == (sharding != "zero3")
    assert ("--use-megatron-fsdp" in script) == (sharding == "zero3")


def test_model_parallel_under_accelerate_is_refused_with_who_can() -> None:
    with pytest.raises(LaunchError) as e:
        export_launch(TP8, 0, "accelerate")
    assert e.value.code == "accelerate_model_parallel"
    assert set(e.value.frameworks) == {"torchtitan", "megatron"}


def test_expert_parallel_under_deepspeed_is_refused() -> None:
    with pytest.raises(LaunchError) as e:
        export_launch(MOE, 0, "deepspeed")
    assert "expert parallel" in e.value.message
    assert "torchtitan" in e.value.frameworks


def test_custom_architecture_under_torchtitan_is_refused_megatron_writes_dimensions() -> None:
    arch = {
        "vocab_size": 32000,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_layers": 22,
        "num_attention_heads": 32,
        "num_kv_heads": 4,
    }
    req = {"model": {"architecture": arch}, "tokens": 1e10}
    with pytest.raises(LaunchError) as e:
        export_launch(req, 0, "torchtitan")
    assert e.value.code == "torchtitan_no_model" and "megatron" in e.value.frameworks
    script = _files(export_launch(req, 0, "megatron"))["launch_megatron.sh"]
    assert "--num-layers 22" in script and "--num-query-groups 4" in script


def test_default_framework_follows_the_request() -> None:
    for fw, launcher in DEFAULT_FOR.items():
        try:
            b = export_launch({**R8, "framework": fw}, 0)
        except LaunchError as e:
            assert e.code.startswith(launcher)
            continue
        assert b.framework == launcher


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ([], "body", "body_not_object"),
        ({"option": 0}, "request", "request_required"),
        ({"request": R8, "option": -1}, "option", "option_not_index"),
        ({"request": R8, "option": True}, "option", "option_not_index"),
        ({"request": R8, "option": "0"}, "option", "option_not_index"),
        ({"request": R8, "option": 0, "framework": "jax"}, "framework", "unknown_framework"),
        ({"request": R8, "option": 0, "colour": 1}, "colour", "unknown_field"),
        ({"request": R8, "option": 99}, "option", "option_out_of_range"),
        ({"request": {**R8, "tokens": -1}, "option": 0}, "request.tokens", None),
    ],
)
def test_bad_input_is_422_with_field_and_code(
    client: TestClient, body: Any, field: str, code: str | None
) -> None:
    r = client.post("/api/v1/sizing/launch", json=body)
    assert r.status_code == 422, r.text
    err = r.json()["detail"]["errors"][0]
    assert err["field"] == field
    if code:
        assert err["code"] == code
    if field == "body":
        with pytest.raises(LaunchError):
            parse_body(body)


def test_refused_layout_is_422_naming_frameworks(client: TestClient) -> None:
    r = client.post(
        "/api/v1/sizing/launch", json={"request": TP8, "option": 0, "framework": "deepspeed"}
    )
    assert r.status_code == 422
    err = r.json()["detail"]["errors"][0]
    assert err["code"] == "deepspeed_model_parallel"
    assert "megatron" in err["frameworks_that_can"]


def test_api_and_cli_give_the_same_bytes(client: TestClient, tmp_path: Any) -> None:
    r = client.post(
        "/api/v1/sizing/launch", json={"request": R70, "option": 1, "framework": "torchtitan"}
    )
    assert r.status_code == 200
    req_file = tmp_path / "req.json"
    req_file.write_text(json.dumps(R70))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.sizing",
            str(req_file),
            "--launch",
            "torchtitan",
            "--option",
            "1",
            "--out",
            str(tmp_path / "files"),
        ],
        capture_output=True,
        check=True,
    )
    assert out.stdout == r.content + b"\n"
    for f in r.json()["files"]:
        assert (tmp_path / "files" / f["name"]).read_text(encoding="utf-8") == f["content"]


def test_cli_refusal_exits_2_with_code(tmp_path: Any) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.sizing",
            "--preset",
            "llama-3.1-8b",
            "--tokens",
            "1e11",
            "--launch",
            "megatron",
            "--option",
            "99",
        ],
        capture_output=True,
    )
    assert out.returncode == 2
    assert json.loads(out.stderr)["errors"][0]["code"] == "option_out_of_range"


def test_expert_parallel_under_torchtitan_turns_cuda_graphs_off() -> None:
    job = _files(export_launch(MOE, 0, "torchtitan"))["launch_job.py"]
    assert "par.expert_parallel_degree = 8" in job
    assert 'model_registry("30B-A3B")' in job
    # torchtitan's own config check refuses the all-to-all dispatcher under CUDA graphs
    assert "config.training.disable_cuda_graphs = True" in job


def test_openapi_documents_the_launch_body_and_answer(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    op = doc["paths"]["/api/v1/sizing/launch"]["post"]
    body = op["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["request", "option"]
    assert set(body["properties"]["framework"]["enum"]) == set(FRAMEWORKS)
    assert "tokens" in body["properties"]["request"]["properties"]
    answer = op["responses"]["200"]["content"]["application/json"]["schema"]
    assert "files" in answer["properties"]


@pytest.mark.parametrize("compiled", [True, False])
def test_torchtitan_turns_async_tp_on_where_the_time_model_priced_it(compiled: bool) -> None:
    """The fsdp2 profile prices compiled TP with its collectives overlapped (async TP), so the
    file a compiled TP answer exports enables it; eager TP has no async TP in torchtitan."""
    request = {**TP8, "framework": "fsdp2", "compile": compiled}
    job = _files(export_launch(request, 0, "torchtitan"))["launch_job.py"]
    assert f"config.compile.enable_async_tensor_parallel = {compiled}" in job
    assert f"config.compile.enable = {compiled}" in job
    plain = _files(export_launch({**FSDP, "compile": compiled}, 0, "torchtitan"))
    assert "config.compile.enable_async_tensor_parallel = False" in plain["launch_job.py"]


REQUESTS = [
    R8,
    {**R8, "global_batch_size": 3, "nodes": 4},
    TP8,
    FSDP,
    HSDP,
    MOE,
    {**R70, "framework": "deepspeed", "parallelism": {"sharding": "zero1"}, **H100},
    {**R8, "framework": "hf", "sku": "hgx-b200"},
]


@pytest.mark.parametrize("req", REQUESTS)
def test_every_framework_a_refusal_names_writes_the_plan(req: dict[str, Any]) -> None:
    """'Frameworks that can run this layout' named DeepSpeed beside a refusal while
    DeepSpeed then refused the same layout (MiCS): the list is what each writer writes."""
    result = size_result(req)
    for index in range(len(result.options)):
        try:
            plan = plan_of(validate(req), result, index)
        except LaunchError:
            continue  # no layout: nothing to write by anyone
        for fw in FRAMEWORKS:
            try:
                export_plan(plan, fw)
            except LaunchError as e:
                assert fw not in e.frameworks
                for other in e.frameworks:
                    export_plan(plan, other)  # raises if it refuses too


def test_an_unknown_framework_is_not_echoed_whole(client: TestClient) -> None:
    r = client.post(
        "/api/v1/sizing/launch", json={"request": R8, "option": 0, "framework": "x" * 100_000}
    )
    assert r.status_code == 422 and len(r.content) < 2_000
    assert "unknown_framework" in r.text


def test_the_step_count_trains_the_budget_and_reads_in_the_singular_for_one() -> None:
    bundle = export_launch({**R8, "tokens": 1}, 0, "megatron")
    text = _files(bundle)["launch_megatron.sh"]
    assert "--train-iters 1\n" in text or "--train-iters 1 " in text
    assert "1 optimizer step of" in text and "the 1 token sized" in text
    assert "warm-up 1 step)" in text
    big = export_launch(R8, 0, "torchtitan").plan
    per_step = big.global_batch_size * big.seq_len
    assert (big.train_steps - 1) * per_step < R8["tokens"] <= big.train_steps * per_step
    assert 1 <= big.warmup_steps <= min(2000, big.train_steps)
