# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""experiments/masked_lm: the steps share one budget, the data keeps held-out articles out of training, and the
evaluation scores every model on the same masked tokens (a window reading equals a whole reading where both fit)."""

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForMaskedLM, BertConfig, BertForMaskedLM, BertTokenizerFast

from experiments.masked_lm import evaluate, run
from experiments.shared import HELDOUT


def test_every_continued_run_has_the_same_budget_data_and_masks(tmp_path):
    continued = [s for s in run.STEPS if s["name"].startswith("continue_")]
    assert {s["name"] for s in continued} >= {"continue_source", "continue_k128", "continue_k256",
                                               "continue_n4096_windowed", "continue_n4096_projected"}
    budget = {(s["options"]["max_steps"], s["options"]["learning_rate"], s["options"]["train_file"],
               s["options"]["seed"], s["options"]["mlm_probability"],
               s["options"]["block_size"] * s["options"]["per_device_train_batch_size"]) for s in continued}
    assert budget == {(run.CONTINUE["max_steps"], run.CONTINUE["learning_rate"], run.TRAIN["train_file"], 0, 0.15,
                       run.TOKENS_PER_UPDATE)}
    names = [s["name"] for s in run.STEPS]
    assert len(names) == len(set(names))
    for step in run.STEPS:  # each step writes where is_done looks
        cmd = run.command(step, tmp_path, tmp_path / "data")
        assert cmd[cmd.index("--output_dir") + 1] == str(tmp_path / step["name"]) and cmd[1] == step["script"]
    for step in run.STEPS:  # every folder a step reads is written by an earlier step
        source = step["options"].get("model_name_or_path", "")
        if source.startswith("{runs}/"):
            assert names.index(source.split("/")[1]) < names.index(step["name"])


@pytest.fixture
def news_dir(tmp_path):
    held_out = [int(i) for i in HELDOUT.read_text().split()]
    outlets = [f"https://www.outlet{j}.com/a" for j in range(3)]
    kept = [i for i in range(1, 10**6) if i not in set(held_out)][:5]
    data = tmp_path / "data"
    (data / "news").mkdir(parents=True)
    (data / "rotten_tomatoes").mkdir()
    rows = [{"id": i, "text": f"article {i}", "source": outlets[n % 3]} for n, i in enumerate(held_out[:30] + kept)]
    with gzip.open(data / "news/train.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    with gzip.open(data / "news/validation.jsonl.gz", "wt") as f:
        f.write(json.dumps({"id": held_out[30], "text": "late", "source": outlets[0]}) + "\n")
    for split in ("train", "validation"):
        (data / "rotten_tomatoes" / f"{split}.csv").write_text('sentence,label\n"good, fine",1\nbad,0\n')
    return data, kept


def test_training_data_leaves_out_every_held_out_article(news_dir, tmp_path):
    data, kept = news_dir
    run.write_data(data, tmp_path / "runs")
    with gzip.open(tmp_path / "runs/data/train_not_heldout.jsonl.gz", "rt") as f:
        assert [json.loads(line)["id"] for line in f] == kept
    outlets = {split: list(csv.DictReader((tmp_path / f"runs/data/outlets/{split}.csv").open()))
               for split in ("train", "validation")}
    assert len(outlets["train"]) + len(outlets["validation"]) == 31  # 30 held out of train, 1 of validation
    assert {r["label"] for r in outlets["validation"]} == {"outlet0.com", "outlet1.com", "outlet2.com"}
    assert list(csv.DictReader((tmp_path / "runs/data/rotten_tomatoes/train.csv").open()))[0] == \
        {"text": "good, fine", "label": "1"}


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    words = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    text = [" ".join(f"w{(i * 7 + j) % 97}" for j in range(40)) for i in range(60)]
    words.train_from_iterator(text, trainers.WordPieceTrainer(
        vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    tokenizer = BertTokenizerFast(tokenizer_object=words, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                  sep_token="[SEP]", mask_token="[MASK]")
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=4, intermediate_size=64, max_position_embeddings=512))
    folder = tmp_path_factory.mktemp("tiny_bert")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, tokenizer, text


def test_masks_are_fixed_all_mask_tokens_and_a_window_reading_equals_the_whole_reading(tiny_bert):
    folder, tokenizer, text = tiny_bert
    articles = [" ".join(text[i:i + 15]) for i in range(0, 60, 15)]  # about 600 tokens each
    blocks, documents, cut = evaluate.masked_readings(tokenizer, articles)
    again = evaluate.masked_readings(tokenizer, articles)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
               for a, b in zip(blocks + documents, again[0] + again[1], strict=True))
    assert len(documents) == 4 and cut == 0 and all(len(ids[0]) <= evaluate.N for ids, _ in blocks)
    for ids, labels in blocks + documents:  # every scored token is the mask token: predicted from context alone
        scored = labels != -100
        mask = ids == tokenizer.mask_token_id
        assert scored.any() and torch.equal(mask, scored)
    model = AutoModelForMaskedLM.from_pretrained(folder).eval()
    ids, labels = documents[0]
    short, short_labels = ids[:, :evaluate.N - 1], labels[:, :evaluate.N - 1].clone()
    short = torch.cat([short, torch.tensor([[tokenizer.sep_token_id]])], 1)
    short_labels = torch.cat([short_labels, torch.tensor([[-100]])], 1)
    whole = evaluate.masked_scores(model, short, short_labels)
    windows = evaluate.score_windows(model, tokenizer, short, short_labels)
    assert len(whole) == (short_labels != -100).sum() > 0
    torch.testing.assert_close(windows, whole, atol=1e-5, rtol=1e-5)
    read = []  # what each window hands the model: a longer document, cut into several
    real = evaluate.masked_scores
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(evaluate, "masked_scores", lambda scorer, window, window_labels: (
            read.append((window[0], window_labels[0])) or real(scorer, window, window_labels)))
        longer = evaluate.score_windows(model, tokenizer, ids, labels)
    assert len(longer) == (labels != -100).sum() and len(read) == -(-(ids.shape[1] - 2) // (evaluate.N - 2)) > 1
    for window, window_labels in read:  # [CLS] piece [SEP], at most N tokens, each label on its own (masked) token
        assert len(window) <= evaluate.N
        assert window[0] == tokenizer.cls_token_id and window[-1] == tokenizer.sep_token_id
        assert torch.equal(window_labels != -100, window == tokenizer.mask_token_id)
    # the pieces are the document, in order, with nothing left out or read twice; and so are their labels
    assert torch.equal(torch.cat([w[1:-1] for w, _ in read]), ids[0, 1:-1])
    assert torch.equal(torch.cat([piece_labels[1:-1] for _, piece_labels in read]), labels[0, 1:-1])


def test_paired_ratio_is_one_for_the_same_losses_and_brackets_a_real_difference():
    rng = np.random.default_rng(0)
    units = [np.column_stack([rng.exponential(2.0, 50), np.zeros(50), np.zeros(50)]) for _ in range(40)]
    same = evaluate.paired_ratio(units, units)
    assert same["ratio"] == pytest.approx(1.0) and same["low"] == pytest.approx(1.0) == same["high"]
    worse = [u + np.array([0.1, 0, 0]) for u in units]
    ratio = evaluate.paired_ratio(worse, units)
    assert ratio["ratio"] == pytest.approx(np.exp(0.1)) and ratio["low"] <= ratio["ratio"] <= ratio["high"]
    noisy = [u + np.column_stack([rng.normal(0.1, 1.0, 50), np.zeros((50, 2))]) for u in units]
    interval = evaluate.paired_ratio(noisy, units)
    assert interval["low"] < interval["ratio"] < interval["high"] and interval["high"] - interval["low"] > 0.01


def test_paired_accuracy_counts_hits_on_the_same_tokens():
    """Top-1/top-5 differences equal the plain difference of hit rates, with intervals that hold it (and collapse
    to it for identical hits)."""
    rng = np.random.default_rng(1)
    reference = [np.column_stack([np.ones(30), rng.random(30) < 0.3, rng.random(30) < 0.5]).astype(float)
                 for _ in range(40)]
    better = [np.column_stack([u[:, 0], np.maximum(u[:, 1], rng.random(30) < 0.2), u[:, 2]]) for u in reference]
    result = evaluate.paired_accuracy(better, reference)
    expected = np.concatenate(better)[:, 1].mean() - np.concatenate(reference)[:, 1].mean()
    assert result["top1"]["difference"] == pytest.approx(expected) and expected > 0.1
    assert 0 < result["top1"]["low"] < expected < result["top1"]["high"]
    assert result["top5"] == {"difference": 0.0, "low": 0.0, "high": 0.0} and result["units"] == 40


def test_report_says_each_goal_met_missed_or_undecided_from_its_interval(tmp_path):
    from experiments.masked_lm import report

    def ratio(model, low, high, reading="blocks"):
        return {"reading": reading, "model": model, "reference": "continue_source", "ratio": (low + high) / 2,
                "low": low, "high": high, "units": 300}

    evaluation = {"models": {}, "comparisons": [ratio("continue_k256", 1.00, 1.02), ratio("continue_k128", 1.06, 1.09),
                                                ratio(run.RELEASE.name, 0.99, 1.01, "documents")]}
    rng = np.random.default_rng(0)
    truth = rng.random(200) < 0.6
    finetuning = {}
    for seed in run.FINETUNE_SEEDS:
        better = truth | (rng.random(200) < 0.5)  # the long model gets more right, every seed
        finetuning[f"outlets_n4096_s{seed}"] = {"correct": better.astype(int).tolist(), "accuracy": better.mean(),
                                                "truncated": {}, "command": f"python finetune_glue.py --seed {seed}"}
        finetuning[f"outlets_source_s{seed}"] = {"correct": truth.astype(int).tolist(), "accuracy": truth.mean(),
                                                 "truncated": {}, "command": f"python finetune_glue.py --seed {seed}"}
    text = report.render(evaluation, {"finetuning": finetuning})
    goals = {line.split(" | ")[0].strip("| "): line.rsplit(" | ", 1)[1].strip(" |")
             for line in text.splitlines() if line.startswith("| n = ") or line.startswith("| outlets,")
             or line.startswith("| Rotten")}
    assert goals == {"n = 512, k = 256 within 3% of standard attention": "met",
                     "n = 512, k = 128 within 5% of standard attention": "**missed**",
                     "n = 4096 on whole documents no worse than the source on 512-token windows": "undecided",
                     "outlets, whole articles: n = 4096 beats the source truncated to 512": "met",
                     "Rotten Tomatoes within 1 point of the source": "-"}
    assert "Rotten Tomatoes within 1 point of the source | not measured yet" in text
    assert "- `outlets_n4096_s2`: `python finetune_glue.py --seed 2`" in text  # every figure with its command
    summary = {"perplexity": 50.0, "top1": 0.34, "top5": 0.52}
    evaluation |= {"models": {run.RELEASE.name: {"blocks": summary, "documents": summary}},
                   "fill_mask": [{"reading": "blocks", "model": run.RELEASE.name, "reference": "source_head",
                                  "top1": {"difference": 0.017, "low": 0.012, "high": 0.022},
                                  "top5": {"difference": -0.001, "low": -0.006, "high": 0.004}, "units": 256}]}
    text = report.render(evaluation, {})
    assert ("| the release: n = 4096 windows + slots, continued (fp16) | source + head (BERT attention) | "
            "+1.7 [+1.2, +2.2] | -0.1 [-0.6, +0.4] |") in text


def test_release_folder_fills_masks_and_predicts_as_the_run_does(tiny_bert, tmp_path):
    from safetensors import safe_open
    from transformers import pipeline

    from experiments.masked_lm import release
    from linformer_training.conversion import convert_to_linformer

    folder, tokenizer, text = tiny_bert
    run_folder = convert_to_linformer(folder, tmp_path / "run", max_seq_length=1024, projected_dim=32,
                                      attention_type="windowed", exact_attention_length=256)
    results = tmp_path / "results.md"
    results.write_text("# Results\n\nintro\n\n## Goals\n\n| goal | status |\n|---|---|\n| k | met |\n\n![p](p.png)\n")
    out = tmp_path / "release" / "mlm"
    release.build(Path(run_folder), out, results)
    card = (out / "README.md").read_text()
    assert "pipeline_tag: fill-mask" in card and "### Goals" in card and "![p]" not in card
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"
    with safe_open(out / "model.safetensors", "pt") as f:
        assert {f.get_tensor(name).dtype for name in f.keys()} == {torch.float16}
    fill = pipeline("fill-mask", model=str(out), trust_remote_code=True)
    assert len(fill(f"w1 w8 {tokenizer.mask_token} w22")) == 5
    reference = AutoModelForMaskedLM.from_pretrained(run_folder).eval()
    ours = AutoModelForMaskedLM.from_pretrained(out, trust_remote_code=True).eval()
    ids = tokenizer([text[0] * 10], truncation=True, max_length=600, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(ours(**ids).logits, reference(**ids).logits, atol=0.05, rtol=0.01)  # fp16 weights

    # --refresh: a new card from new results, the remote code from src/ again (here a version behind), the weights
    # and every other file byte for byte, the manifest matching the folder
    from linformer_training import checkpoints

    code = (out / "modeling_linformer.py").read_bytes()
    (out / "modeling_linformer.py").write_bytes(code + b"# a version behind\n")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    results.write_text("# Results\n\n## Goals\n\n| goal | status |\n|---|---|\n| k | **missed** |\n")
    release.main(["--refresh", "--out", str(out), "--results", str(results)])
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert after.keys() == before.keys()
    assert {n for n in after if after[n] != before[n]} == {"README.md", "modeling_linformer.py", checkpoints.MANIFEST}
    assert after["modeling_linformer.py"] == code and "| k | **missed** |" in (out / "README.md").read_text()
    assert checkpoints.check_manifest(out) is True
    with pytest.raises(SystemExit, match="--refresh: .* is not a release folder"):
        release.main(["--refresh", "--out", str(tmp_path / "none"), "--results", str(results)])


def test_commands_on_record_run_from_the_repository_root(tmp_path):
    """The n = 4096 finetunes read the committed release: results.md names it as a user's clone has it."""
    from experiments.masked_lm import collect
    from experiments.shared import REPO

    step = next(s for s in run.STEPS if s["name"] == "rt_n4096_s0")
    shown = collect.command_of(step, tmp_path)
    assert shown.startswith(f"python finetune_glue.py --model_name_or_path release/{run.RELEASE.name} ")
    assert str(REPO) not in shown and f"--output_dir {tmp_path}/rt_n4096_s0" in shown


def test_a_training_record_whose_run_is_gone_stays_marked_as_an_earlier_build():
    """The release's run may be gone from the runs folder; its record stays, marked, and the table says so.
    Finetuning records of gone runs are dropped (their recipe may have changed)."""
    from experiments.masked_lm import collect, report

    record = {"done": True, "tokens": 10, "hours": 0.5, "curve": [{"step": 0, "tokens": 0, "perplexity": 9.0}],
              "command": "python train_mlm.py"}
    previous = {"training": {"continue_n4096_windowed": record, "source_head": {**record, "tokens": 1}},
                "finetuning": {"outlets_source_s0": {"accuracy": 0.5}}}
    collected = {"training": {"source_head": {**record, "tokens": 2}}, "finetuning": {}}
    collect.keep_earlier_builds(collected, previous)
    assert collected["training"]["source_head"] == {**record, "tokens": 2}
    assert collected["training"]["continue_n4096_windowed"] == {**record, "earlier_build": True}
    assert collected["finetuning"] == {}
    assert "| continue_n4096_windowed (earlier build) | yes | 10 | 0.50 | 9.0 | 9.0 |" in report.render({}, collected)
