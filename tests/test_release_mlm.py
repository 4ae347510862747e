# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The released Linformer masked-LM (release/minilm-l6-linformer-mlm-n4096, built by `make release-mlm`): it fills
masks on held-out text, reads short inputs exactly, and takes every path its card names (fill-mask pipeline,
AutoModelForMaskedLM, finetune_glue.py and train_mlm.py --model_name_or_path)."""

import json

import pytest
import torch
from conftest import REPO
from safetensors import safe_open

RELEASE = REPO / "release" / "minilm-l6-linformer-mlm-n4096"
pytestmark = pytest.mark.skipif(not RELEASE.is_dir(), reason="release/minilm-l6-linformer-mlm-n4096 is not built yet")
# A sentence of news article 608 (validation split: never trained on) with one word masked, and that word.
HELD_OUT = ('"I\'m more than thrilled," Zhang said in an [MASK] with Xinhua News Agency in 2014.', "interview")


def check_fill_mask(folder, sentence, word):
    from transformers import pipeline

    fill = pipeline("fill-mask", model=str(folder), trust_remote_code=True)
    assert fill(sentence)[0]["token_str"] == word


def check_weights_and_dtype(folder):
    from transformers import AutoModelForMaskedLM

    with safe_open(folder / "model.safetensors", "pt") as f:
        assert {f.get_tensor(name).dtype for name in f.keys()} == {torch.float16}
    model = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True)
    assert type(model).__name__ == "LinformerForMaskedLM" and next(model.parameters()).dtype == torch.float32
    return model


@torch.no_grad()
def check_exact_short_path(model, tokenizer):
    """An input of at most exact_attention_length tokens never meets E/F, the gates or the adapters: replacing
    them changes nothing for it, and changes a longer input."""
    from linformer_training.models import is_long_path

    model.eval()
    limit = model.config.exact_attention_length
    short = tokenizer(["word " * (limit - 2)], return_tensors="pt")
    long = tokenizer(["word " * (limit + 300)], return_tensors="pt")
    assert short["input_ids"].shape[1] <= limit < long["input_ids"].shape[1]
    before = model(**short).logits, model(**long).logits
    generator = torch.Generator().manual_seed(0)
    for name, parameter in model.named_parameters():
        if is_long_path(name):
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    assert torch.equal(model(**short).logits, before[0])
    assert not torch.allclose(model(**long).logits, before[1], atol=1e-3)


def test_release_fills_a_held_out_mask_and_loads_in_float32():
    check_fill_mask(RELEASE, *HELD_OUT)
    check_weights_and_dtype(RELEASE)


def test_release_reads_short_inputs_exactly():
    from transformers import AutoTokenizer

    check_exact_short_path(check_weights_and_dtype(RELEASE), AutoTokenizer.from_pretrained(RELEASE))


def test_release_finetunes_and_continues_pretraining(tmp_path, fresh_accelerate_state):
    import finetune_glue
    import train_mlm

    rows = ["text,label"] + [f"the {w} was {'good' if i % 2 else 'bad'},{i % 2}" for i, w in
                             enumerate(["film", "play", "book", "song"] * 4)]
    (tmp_path / "train.csv").write_text("\n".join(rows) + "\n")
    finetune_glue.main(["--model_name_or_path", str(RELEASE), "--train_file", str(tmp_path / "train.csv"),
                        "--validation_file", str(tmp_path / "train.csv"), "--text_column", "text", "--label_column",
                        "label", "--max_steps", "2", "--per_device_train_batch_size", "4", "--do_predict", "false",
                        "--report_to", "none", "--output_dir", str(tmp_path / "finetuned")])
    assert json.loads((tmp_path / "finetuned" / "eval_results.json").read_text())["validation"]["num_examples"] == 16
    train_mlm.main(["--model_name_or_path", str(RELEASE), "--max_steps", "2", "--warmup_steps", "0",
                    "--block_size", "128", "--per_device_train_batch_size", "2", "--max_eval_samples", "4",
                    "--report_to", "none", "--output_dir", str(tmp_path / "continued")])
    assert (tmp_path / "continued" / "model.safetensors").is_file()
