# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Jargon checkpoints (PantagrueLLM's French Linformers): converted exactly against logits of their own code, loaded
everywhere a linformer-hf folder loads, and refused in one line where the converter cannot know.

tests/data/jargon holds three tiny random checkpoints in their format (one per sharing mode) and the float32 logits
their modules gave, each input run alone; tests/data/jargon/README.md says how they were made."""

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO
from safetensors.torch import load_file, save_file
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer, pipeline

from linformer_hf import LinformerConfig, LinformerForMaskedLM
from linformer_training.arguments import UsageError
from linformer_training.conversion import convert_to_linformer

DATA = REPO / "tests" / "data" / "jargon"
REFERENCE = load_file(DATA / "reference.safetensors")
LENGTHS = (1, 7, 32)  # one token, a few, n
N = 32
VARIANTS = {"layerwise": "pytorch_model.bin", "headwise": "model.safetensors", "key_value": "model.safetensors"}
WORDS = "the whale was good great fine lovely bad dull poor awful and sea calm rough il est allé au hier".split()


def word_tokenizer():
    """A 100-token RoBERTa-style tokenizer for the checkpoints' 100-row table (<s>=0, <pad>=1, </s>=2, <mask>=4)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    words = WORDS + [f"w{i}" for i in range(100 - len(specials) - len(WORDS))]
    backend = Tokenizer(models.WordLevel({t: i for i, t in enumerate(specials + words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", mask_token="<mask>", cls_token="<s>", sep_token="</s>")


def jargon_folder(variant, folder):
    """A copy of a stored checkpoint with a tokenizer beside it, as a Hub repo of theirs holds one."""
    shutil.copytree(DATA / variant, folder)
    word_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp("jargon")
    return {variant: convert_to_linformer(jargon_folder(variant, root / variant), root / f"{variant}-linformer")
            for variant in VARIANTS}


def inputs():
    return [REFERENCE[f"input_ids.{length}"].long() for length in LENGTHS]


def padded(sequences, side, pad=1):
    ids, mask = torch.full((len(sequences), N), pad), torch.zeros(len(sequences), N, dtype=torch.long)
    for row, seq in enumerate(sequences):
        span = slice(0, len(seq)) if side == "right" else slice(N - len(seq), N)
        ids[row, span], mask[row, span] = seq, 1
    return ids, mask


@torch.no_grad()
def worst_difference(model, variant):
    """Max abs difference from their logits: each input alone, then all in one batch padded right and left."""
    worst = 0.0
    for seq in inputs():
        logits = model(input_ids=seq[None], attention_mask=torch.ones(1, len(seq), dtype=torch.long)).logits[0]
        worst = max(worst, (logits - REFERENCE[f"{variant}.logits.{len(seq)}"]).abs().max().item())
    for side in ("right", "left"):
        ids, mask = padded(inputs(), side)
        logits = model(input_ids=ids, attention_mask=mask).logits
        for row, seq in enumerate(inputs()):
            got = logits[row][mask[row].bool()]
            worst = max(worst, (got - REFERENCE[f"{variant}.logits.{len(seq)}"]).abs().max().item())
    return worst


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_converted_logits_are_their_code_alone_and_in_padded_batches(converted, variant, impl):
    """float32 logits within 1e-5 of their modules' on 1, 7 and n tokens, and per sequence of a batch padded right
    or left (their layers never mask padding: they were run on each sequence alone)."""
    model = AutoModelForMaskedLM.from_pretrained(converted[variant], attn_implementation=impl).eval()
    config = model.config
    assert (config.layer_norm_placement, config.embedding_layer_norm, config.projection_sharing) == ("pre", False,
                                                                                                      variant)
    assert (config.max_seq_length, config.projected_dim, config.num_hidden_layers, config.num_attention_heads,
            config.intermediate_size) == (32, 8, 2, 4, 24)  # num_layers, encoder_attention_heads: what they read
    assert config.projection_length_scaling == "none" and config.exact_attention_length is None
    assert worst_difference(model, variant) <= 1e-5


def test_layerwise_sharing_with_one_compression_for_keys_and_values(tmp_path):
    """shared_layer_kv_compressed=1 with shared_kv_compressed=1: their values read the same shared matrix through
    compress_k instead of compress_v, the same computation; the checkpoint then has no compress_v tensors."""
    folder = jargon_folder("layerwise", tmp_path / "src")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "shared_kv_compressed": 1}))
    state = torch.load(folder / "pytorch_model.bin", weights_only=True)
    torch.save({k: v for k, v in state.items() if "compress_v" not in k}, folder / "pytorch_model.bin")
    model = AutoModelForMaskedLM.from_pretrained(convert_to_linformer(folder, tmp_path / "out")).eval()
    assert model.config.projection_sharing == "layerwise"
    assert worst_difference(model, "layerwise") <= 1e-5


def without(adaptation, folder, tensors):
    """The converted model with one adaptation undone, as a conversion without it would give."""
    model = AutoModelForMaskedLM.from_pretrained(folder).eval()
    state = model.state_dict()
    values = model.config.to_dict()
    layers = range(model.config.num_hidden_layers)
    if adaptation == "pre-LN":  # the same LayerNorms, where a post-LN layer has them; no final one
        values["layer_norm_placement"] = "post"
        for i in layers:
            for ours, post in (("attention_layer_norm", "attention.output.LayerNorm"),
                               ("feed_forward_layer_norm", "output.LayerNorm")):
                for part in ("weight", "bias"):
                    state[f"linformer.encoder.layer.{i}.{post}.{part}"] = state.pop(
                        f"linformer.encoder.layer.{i}.{ours}.{part}")
        del state["linformer.encoder.final_layer_norm.weight"], state["linformer.encoder.final_layer_norm.bias"]
    elif adaptation == "embedding LayerNorm":  # their checkpoint's (unused) embedding LayerNorm applied
        values["embedding_layer_norm"] = True
        for part in ("weight", "bias"):
            state[f"linformer.embeddings.LayerNorm.{part}"] = tensors[f"roberta.embeddings.LayerNorm.{part}"]
    else:  # "bias folding": their key, value and output biases as they are
        for i in layers:
            theirs, ours = f"roberta.encoder.layer.{i}.attention.", f"linformer.encoder.layer.{i}.attention."
            state[f"{ours}self.key.bias"] = tensors[f"{theirs}k_proj.bias"]
            state[f"{ours}self.value.bias"] = tensors[f"{theirs}v_proj.bias"]
            state[f"{ours}output.dense.bias"] = tensors[f"{theirs}out_proj.bias"]
    undone = LinformerForMaskedLM(LinformerConfig.from_dict(values))
    undone.load_state_dict(state, strict=False)
    return undone.eval()


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("adaptation", ["pre-LN", "embedding LayerNorm", "bias folding"])
def test_undoing_any_one_adaptation_breaks_the_exactness(converted, variant, adaptation):
    """Each is needed: without it the logits move by far more than the 1e-5 kept (measured: 1.4 to 2.7)."""
    weights = DATA / variant / VARIANTS[variant]
    tensors = load_file(weights) if weights.suffix == ".safetensors" else torch.load(weights, weights_only=True)
    assert worst_difference(without(adaptation, converted[variant], tensors), variant) > 1e-2


def test_the_folder_loads_everywhere(converted):
    """AutoModelForMaskedLM, pipeline("fill-mask"), AutoModelForSequenceClassification (a fresh head on the same
    encoder) and SentenceTransformer (mean pooling) all read the converted folder; inputs longer than n are refused."""
    folder = converted["layerwise"]
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "configuration_linformer.py", "modeling_linformer.py", "README.md",
            "tokenizer.json", "tokenizer_config.json"} <= names and "pytorch_model.bin" not in names
    masked = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.model_max_length == N
    batch = tokenizer(["il est allé au <mask> hier", "the whale was good"], padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = masked(**batch).logits
    fill = pipeline("fill-mask", model=str(folder), device="cpu")
    predictions = fill("il est allé au <mask> hier", top_k=5)
    masked_at = batch["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    assert [p["token"] for p in predictions] == logits[0, masked_at].topk(5).indices.tolist()

    classifier = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=3).eval()
    with torch.no_grad():
        assert classifier(**batch).logits.shape == (2, 3)
        torch.testing.assert_close(classifier.linformer(**batch).last_hidden_state,
                                   masked.linformer(**batch).last_hidden_state, rtol=0, atol=0)

    st = pytest.importorskip("sentence_transformers")
    embedder = st.SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
    embeddings = embedder.encode(["il est allé au hier", "the whale was good"], convert_to_tensor=True)
    one = tokenizer("the whale was good", return_tensors="pt")
    with torch.no_grad():
        assert (embeddings[1] - masked.linformer(**one).last_hidden_state[0].mean(0)).abs().max() <= 1e-5

    with pytest.raises(ValueError, match=f"the input has {N + 1} tokens but `max_seq_length` \\(n\\) is {N}"):
        masked(input_ids=torch.full((1, N + 1), 7))


def test_remote_code_reads_it_in_a_clean_process(converted, tmp_path):
    """A user without linformer-hf installed: the folder's own modeling code gives the same logits."""
    folder = converted["key_value"]
    script = f"""
import sys, torch
sys.modules["linformer_hf"] = None
sys.modules["linformer_training"] = None
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM
model = AutoModelForMaskedLM.from_pretrained({str(folder)!r}, trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
reference = load_file({str(DATA / "reference.safetensors")!r})
with torch.no_grad():
    worst = max((model(input_ids=reference[f"input_ids.{{n}}"].long()[None]).logits[0]
                 - reference[f"key_value.logits.{{n}}"]).abs().max().item() for n in {LENGTHS!r})
print(worst)
"""
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert float(result.stdout.split()[-1]) <= 1e-5


def test_the_card_names_the_source_its_licence_and_what_changed(converted):
    card = (converted["headwise"] / "README.md").read_text()
    assert "headwise" in card and "PantagrueLLM/Jargon" in card and "license: other" in card
    assert "states none either" in card and "Padding is now invisible" in card
    assert "`num_heads`=7 (`encoder_attention_heads`=4 is read)" in card  # what their code ignores, and reads
    assert "sbo_head.*" in card and "k_proj.bias" in card


def test_dropped_tensors_are_listed_once(tmp_path, caplog):
    folder = jargon_folder("layerwise", tmp_path / "src")
    with caplog.at_level(logging.WARNING, logger="linformer_training.jargon"):
        convert_to_linformer(folder, tmp_path / "out")
    (record,) = [r for r in caplog.records if "dropped" in r.getMessage()]
    message = record.getMessage()
    assert "\n" not in message and "dropped 23 tensor(s)" in message
    for name in ("roberta.embeddings.LayerNorm.weight", "roberta.encoder.layer.*.output.LayerNorm.bias",
                 "roberta.encoder.compress_layer.bias", "roberta.encoder.layer.*.attention.k_proj.bias", "sbo_head.*"):
        assert message.count(name) == 1, name


def test_finetune_glue_and_export_onnx_take_the_converted_folder(converted, tmp_path, fresh_accelerate_state):
    """finetune_glue.py trains a classifier from it; export_onnx.py writes a fill-mask graph that ONNX Runtime runs
    to their logits (within the export's 1e-4 tolerance)."""
    from finetune_glue import main as finetune

    rows = [{"text": f"the whale was {word} and the sea calm", "label": "pos" if i % 2 else "neg"}
            for i, word in enumerate(["good", "bad", "great", "dull"] * 6)]
    files = {}
    for split, part in (("train", rows[:16]), ("validation", rows[16:])):
        files[split] = tmp_path / f"{split}.jsonl"
        files[split].write_text("".join(json.dumps(r) + "\n" for r in part))
    results = finetune(["--model_name_or_path", str(converted["layerwise"]), "--train_file", str(files["train"]),
                        "--validation_file", str(files["validation"]), "--text_column", "text", "--output_dir",
                        str(tmp_path / "finetuned"), "--report_to", "none", "--max_steps", "2",
                        "--per_device_train_batch_size", "8", "--max_seq_length", str(N)])
    assert results["validation"]["num_examples"] == 8
    config = json.loads((tmp_path / "finetuned" / "config.json").read_text())
    assert config["architectures"] == ["LinformerForSequenceClassification"]
    assert (config["layer_norm_placement"], config["embedding_layer_norm"]) == ("pre", False)

    onnxruntime = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from linformer_training.onnx_export import export_onnx

    out, difference = export_onnx(converted["headwise"], output_dir=tmp_path / "onnx", quantize=False)
    assert difference <= 1e-4
    session = onnxruntime.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    ids, mask = padded(inputs(), "left")
    logits = torch.from_numpy(session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0])
    for row, seq in enumerate(inputs()):
        assert (logits[row][mask[row].bool()] - REFERENCE[f"headwise.logits.{len(seq)}"]).abs().max() <= 1e-4


# --- what the converter cannot know: one line naming the argument, and nothing written ---------------------


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps({k: v for k, v in config.items() if v is not None}))


def edit_tensors(folder, change):
    state = load_file(folder / "model.safetensors")
    change(state)
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})


REFUSED = {
    "unknown field": (lambda f: edit_config(f, use_rotary=True), {}, "--model_name_or_path",
                      "'use_rotary' that Jargon's JargonConfig does not define"),
    "another architecture": (lambda f: edit_config(f, architectures=["JargonForSequenceClassification"]), {},
                             "--model_name_or_path", "supported: JargonForMaskedLM"),
    "no final LayerNorm": (lambda f: edit_config(f, encoder_normalize_before=False), {}, "--model_name_or_path",
                           "encoder_normalize_before=False is not supported; allowed: true"),
    "another sharing flag": (lambda f: edit_config(f, shared_kv_compressed=2), {}, "--model_name_or_path",
                             "shared_kv_compressed=2 is not supported; allowed: 0 or 1"),
    "another eps": (lambda f: edit_config(f, layer_norm_eps=1e-12), {}, "--model_name_or_path",
                    "layer_norm_eps=1e-12 is not supported"),
    "k of another size": (lambda f: edit_config(f, compressed=2), {}, "--model_name_or_path",
                          "does not match its config.json: roberta.encoder.layer.0.attention.compress_k.weight is "
                          "(8, 32), its config needs (16, 32)"),
    "another width": (lambda f: edit_config(f, intermediate_size=32), {}, "--model_name_or_path",
                      "intermediate.dense.weight is (24, 16), its config needs (32, 16)"),
    "a missing tensor": (lambda f: edit_tensors(f, lambda s: s.pop("roberta.encoder.layer.1.output.dense.bias")), {},
                         "--model_name_or_path", "lacks 1 tensor(s) its config.json needs, e.g. "
                                                 "roberta.encoder.layer.1.output.dense.bias"),
    "a tensor it does not define": (lambda f: edit_tensors(f, lambda s: s.update(
        {"roberta.pooler.dense.weight": torch.zeros(16, 16)})), {}, "--model_name_or_path",
        "1 tensor(s) that JargonForMaskedLM with its config.json does not define, e.g. roberta.pooler.dense.weight"),
    "a layer it does not have": (lambda f: edit_config(f, num_layers=3), {}, "--model_name_or_path",
                                 "tensor(s) its config.json needs, e.g. roberta.encoder.layer.2."),
    "a fixed flag": (lambda f: None, {"projected_dim": 16}, "--projected_dim 16", "a Jargon checkpoint fixes n, k"),
    "pickled weights": (lambda f: torch.save({"weights": {"a": 1}, "x": object}, f / "pytorch_model.bin")
                        or (f / "model.safetensors").unlink(), {}, "--model_name_or_path", "pytorch_model.bin:"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_the_converter_cannot_know_is_refused_in_one_line(case, tmp_path):
    damage, flags, flag, mention = REFUSED[case]
    folder = jargon_folder("headwise", tmp_path / "src")
    damage(folder)
    with pytest.raises(UsageError) as error:
        convert_to_linformer(folder, tmp_path / "out", **flags)
    message = str(error.value)
    assert message.startswith(flag) and mention in message and "\n" not in message, message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_the_command_converts_a_jargon_folder(tmp_path, capsys):
    import convert_to_linformer

    folder = jargon_folder("key_value", tmp_path / "src")
    convert_to_linformer.main(["--model_name_or_path", str(folder), "--output_dir", str(tmp_path / "out")])
    assert f"wrote {tmp_path / 'out'}" in capsys.readouterr().out
    assert Path(tmp_path / "out" / "model.safetensors").is_file()
