# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Linformer as an HF citizen: Auto classes, save/load, remote code, pipelines, Trainer, DDP, compile."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import forward_calls, free_port, run_group, tiny_config
from safetensors import safe_open
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    pipeline,
)

from linformer_hf import LinformerConfig, LinformerForMaskedLM, LinformerForSequenceClassification, LinformerModel

TESTS = Path(__file__).resolve().parent


def test_auto_classes_know_linformer():
    values = {k: v for k, v in tiny_config().to_dict().items() if k != "model_type"}
    config = AutoConfig.for_model("linformer", **values)
    assert isinstance(config, LinformerConfig)
    assert type(AutoModel.from_config(config)) is LinformerModel
    assert type(AutoModelForMaskedLM.from_config(config)) is LinformerForMaskedLM


@pytest.mark.parametrize("sharing", ["none", "headwise", "key_value", "layerwise"])
def test_save_and_load_keeps_weights_and_sharing(sharing, tmp_path):
    model = LinformerForMaskedLM(tiny_config(num_hidden_layers=3, projection_sharing=sharing))
    model.save_pretrained(tmp_path)
    with safe_open(tmp_path / "model.safetensors", "pt") as f:
        stored = [key for key in f.keys() if ".projections." in key]
    assert len(stored) == {"none": 6, "headwise": 6, "key_value": 3, "layerwise": 1}[sharing]
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path)
    assert type(loaded) is LinformerForMaskedLM
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    projections = loaded.linformer.encoder.projections
    distinct = {id(t) for i in range(3) for t in projections.for_layer(i)}
    assert len(distinct) == {"none": 6, "headwise": 6, "key_value": 3, "layerwise": 1}[sharing]
    assert loaded.lm_head.decoder.weight is loaded.linformer.embeddings.word_embeddings.weight


def test_saved_folder_carries_remote_code_for_every_head(tmp_path):
    LinformerForSequenceClassification(tiny_config()).save_pretrained(tmp_path)
    assert {"configuration_linformer.py", "modeling_linformer.py"} <= {p.name for p in tmp_path.iterdir()}
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert auto_map["AutoModelForMaskedLM"] == "modeling_linformer.LinformerForMaskedLM"
    assert len(auto_map) == 7
    imports = [line for line in (tmp_path / "modeling_linformer.py").read_text().splitlines()
               if line.startswith(("import ", "from "))]
    # What any Python has (nothing to install on the Hub), torch and transformers, and the file's own package.
    allowed = {*sys.stdlib_module_names, "torch", "transformers", ""}
    assert all(line.split()[1].split(".")[0] in allowed for line in imports), imports


def test_remote_code_loads_where_the_package_is_not_importable(tmp_path):
    torch.manual_seed(0)
    model = LinformerForMaskedLM(tiny_config()).eval()
    model.save_pretrained(tmp_path)
    ids = [[0, 17, 45, 99, 2]]
    expected = model(torch.tensor(ids)).logits
    script = f"""
import sys, json, torch
sys.modules["linformer_hf"] = None  # as for a user who never installed the package
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification
model = AutoModelForMaskedLM.from_pretrained({str(tmp_path)!r}, trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
clf = AutoModelForSequenceClassification.from_pretrained({str(tmp_path)!r}, trust_remote_code=True)
print(json.dumps(model(torch.tensor({ids})).logits.tolist()))
"""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    got = torch.tensor(json.loads(result.stdout.strip().splitlines()[-1]))
    torch.testing.assert_close(got, expected)


def test_fill_mask_and_text_classification_pipelines(tokenizer, tmp_path):
    torch.manual_seed(0)
    config = tiny_config(vocab_size=len(tokenizer), id2label={0: "rotten", 1: "fresh"},
                         label2id={"rotten": 0, "fresh": 1})
    LinformerForMaskedLM(config).save_pretrained(tmp_path / "mlm")
    tokenizer.save_pretrained(tmp_path / "mlm")
    fill = pipeline("fill-mask", model=str(tmp_path / "mlm"), device="cpu")
    predictions = fill("Call me <mask>.", top_k=3)
    assert len(predictions) == 3 and all(p["token_str"] is not None for p in predictions)

    LinformerForSequenceClassification(config).save_pretrained(tmp_path / "clf")
    tokenizer.save_pretrained(tmp_path / "clf")
    classify = pipeline("text-classification", model=str(tmp_path / "clf"), device="cpu")
    assert classify(["The whale was splendid.", "Dreadful voyage."])[0]["label"] in ("rotten", "fresh")


def test_a_bert_folder_loaded_as_linformer_points_to_conversion(tmp_path):
    from transformers import BertConfig, BertModel

    BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                         intermediate_size=37)).save_pretrained(tmp_path)
    for load in (LinformerForMaskedLM.from_pretrained, LinformerConfig.from_pretrained):
        with pytest.raises(ValueError, match=r"checkpoint is a `bert` model.*convert_to_linformer\.py"):
            load(tmp_path)


def test_resize_token_embeddings_keeps_the_decoder_tied():
    model = LinformerForMaskedLM(tiny_config())
    model.resize_token_embeddings(310)
    assert model.config.vocab_size == 310
    assert model.lm_head.decoder.weight is model.linformer.embeddings.word_embeddings.weight
    assert model(torch.randint(0, 310, (1, 5))).logits.shape == (1, 5, 310)


def grads(model, ids, mask, run=None):
    model.zero_grad()
    (model if run is None else run)(ids, attention_mask=mask, labels=ids).loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("exact_attention_length", [None, 8])
def test_gradient_checkpointing_gives_the_same_gradients(exact_attention_length):
    torch.manual_seed(0)
    model = LinformerForMaskedLM(tiny_config(projection_sharing="layerwise",
                                             exact_attention_length=exact_attention_length)).train()
    ids = torch.randint(5, 300, (2, 20))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0  # 6 <= k real tokens: with the option, an exact row beside a projected one
    layers = model.linformer.encoder.layer
    assert forward_calls(layers, lambda: grads(model, ids, mask)) == len(layers)
    plain = grads(model, ids, mask)
    model.activation_checkpointing_enable()
    assert forward_calls(layers, lambda: grads(model, ids, mask)) == 2 * len(layers)  # each layer recomputed
    checkpointed = grads(model, ids, mask)
    assert "linformer.encoder.projections.shared" in checkpointed
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], msg=name)


@pytest.mark.parametrize("exact_attention_length", [None, 8])
def test_torch_compile_traces_the_whole_model_without_graph_breaks(exact_attention_length):
    """Input checks and the short-input test read tensor values, which would break the graph: both are
    skipped or made branch-free under compilation."""
    model = LinformerForMaskedLM(tiny_config(projection_sharing="headwise",
                                             exact_attention_length=exact_attention_length)).train()
    ids = torch.randint(5, 300, (2, 20))
    mask = torch.ones_like(ids)
    mask[0, 5:] = 0
    expected = grads(model, ids, mask)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    got = grads(model, ids, mask, run=compiled)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], msg=name)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_forward_and_backward(dtype):
    torch.manual_seed(0)
    model = LinformerForMaskedLM(tiny_config())
    ids = torch.randint(5, 300, (2, 24))
    reference = model(ids, labels=ids).loss
    with torch.autocast("cpu", dtype=dtype):
        out = model(ids, labels=ids)
    out.loss.backward()
    assert out.logits.dtype == dtype
    assert torch.isfinite(model.linformer.encoder.projections.shared.grad).all()
    assert abs(out.loss.item() - reference.item()) < 0.05 * reference.item()


def test_model_in_bfloat16():
    model = LinformerModel(tiny_config(projection_type="max_pool")).to(torch.bfloat16)
    ids = torch.randint(5, 300, (2, 24))
    mask = torch.ones_like(ids)
    mask[0, 5:] = 0
    assert torch.isfinite(model(ids, attention_mask=mask).last_hidden_state.float()).all()


def run_trainer_worker(tmp_path, processes, gradient_checkpointing=False):
    command = [sys.executable, str(TESTS / "trainer_worker.py"), str(tmp_path), "layerwise",
               *(["gradient_checkpointing"] if gradient_checkpointing else [])]
    if processes > 1:
        command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={processes}",
                   "--master_addr=127.0.0.1", f"--master_port={free_port()}", *command[1:]]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = run_group(command, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line.split(" ", 1)[1]) for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    return {row["head"]: row for row in rows}


@pytest.mark.parametrize("processes, gradient_checkpointing", [(1, False), (2, False), (2, True)])
def test_trainer_trains_every_head_with_its_loss(processes, gradient_checkpointing, tmp_path):
    """With activation checkpointing under DDP too: the layerwise projection, one parameter used by every
    checkpointed layer, gets its gradient once per backward and the replicas stay equal."""
    rows = run_trainer_worker(tmp_path, processes, gradient_checkpointing)
    assert set(rows) == {"masked_lm", "regression", "single_label", "multi_label", "token", "qa", "multiple_choice"}
    for head, row in rows.items():
        assert row["world"] == processes and row["checkpointing"] == gradient_checkpointing
        # The loss Trainer reports is the head's loss recomputed by hand (no rescaling under DDP) ...
        assert row["reported"] == pytest.approx(row["recomputed"], rel=1e-5), head
        # ... every rank holds the same weights after training, and the shared projection stayed one tensor.
        assert len(row["checksums"]) == processes and max(row["checksums"]) == min(row["checksums"]), head
        assert row["projections"] == 1
