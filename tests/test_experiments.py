"""experiments/quality/: the study's run table, and run_study -> short_inputs -> render end to end on a
copy of the folder whose study.py keeps every run but shrinks the model, data and budget to seconds."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.quality import study

REPO = Path(__file__).resolve().parents[1]


def test_study_covers_every_comparison_of_the_issue_under_one_budget():
    runs = {r["name"]: r for r in study.RUNS}
    arch = {(r["model_type"], r["n"], r.get("k"), r.get("sharing")) for r in study.RUNS}
    assert ("roberta", 512, None, None) in arch
    assert {("linformer", 512, k, "layerwise") for k in (64, 128, 256)} <= arch
    assert {("linformer", 512, 128, s) for s in ("none", "headwise", "key_value", "layerwise")} <= arch
    assert {("linformer", n, 128, "layerwise") for n in (512, 1024, 2048)} <= arch
    for name in ("roberta_n512", "linformer_n512_k128_layerwise"):
        assert {runs[f"{name}_s{s}"]["seed"] for s in (0, 1, 2)} == {0, 1, 2}
    assert len(study.FINETUNE_SEEDS) >= 3
    # The budget is shared: runs differ only in attention, n, seed and the batch that keeps tokens per update.
    assert all(study.TOKENS_PER_UPDATE % r["n"] == 0 for r in study.RUNS)
    shared_fields = set(study.PRETRAIN["config_overrides"])
    assert not any(shared_fields & set(r["config_overrides"]) for r in study.RUNS)
    # The corpora are not bundled: no run reads them from anywhere but --data_dir.
    assert not any(key.endswith("_file") for key in [*study.PRETRAIN, *study.FINETUNE])


TINY_STUDY = '''
exec(open({real!r}).read())  # the real study's helpers, bound to this module's RUNS

DATA = "data"
PRETRAIN_DATA = {{"train_file": "news/train.jsonl", "validation_file": "news/validation.jsonl"}}
TOKENIZER = "experiments/checkpoints/tokenizer"
TOKENIZER_VOCAB_SIZE = 300
TOKENS_PER_UPDATE = 64
PRETRAIN = {{**PRETRAIN, "tokenizer_name": TOKENIZER, "warmup_steps": 1, "max_steps": 4, "eval_steps": 2,
            "logging_steps": 1, "mixed_precision": "no",
            "config_overrides": {{"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                                 "intermediate_size": 64}}}}
FINETUNE = {{**FINETUNE, "max_seq_length": 32, "per_device_train_batch_size": 8, "mixed_precision": "no",
            "logging_steps": 1}}
FINETUNE_SEEDS = (0,)
RUNS = [run("roberta_n512", roberta(32), 0), run("linformer_n512_k128_layerwise", linformer(32, 8), 0, ["sqrt"])]
'''


@pytest.fixture(scope="module")
def study_copy(tmp_path_factory):
    """A repository-shaped folder: the real scripts and configs, a tiny study.py, small real text."""
    root = tmp_path_factory.mktemp("repo")
    (root / "experiments/quality").mkdir(parents=True)
    for name in ("__init__.py", "quality/__init__.py", "quality/run_study.py", "quality/short_inputs.py",
                 "quality/feature_probes.py", "quality/render.py", "quality/paper_numbers.yaml"):
        shutil.copy(REPO / "experiments" / name, root / "experiments" / name)
    (root / "experiments/quality/study.py").write_text(TINY_STUDY.format(real=str(REPO / "experiments/quality/study.py")))
    for name in ("train_mlm.py", "finetune_glue.py", "configs"):
        (root / name).symlink_to(REPO / name)
    (root / "model_card.md").write_text("# card\n\n<!-- BEGIN RESULTS: written by experiments/quality/render.py, do not edit "
                                        "-->\nold\n<!-- END RESULTS -->\n\n## Limitations\n")
    chapters = [json.loads(line) for line in open(REPO / "data/moby_dick/chapters.jsonl")]
    (root / "data/news").mkdir(parents=True)
    for split, docs in (("train", chapters[2:12]), ("validation", chapters[12:14])):
        (root / f"data/news/{split}.jsonl").write_text("".join(json.dumps({"text": c["text"]}) + "\n" for c in docs))
    (root / "data/rotten_tomatoes").mkdir()
    words = {"1": ["fine", "grand", "good"], "0": ["dull", "poor", "bad"]}
    for split, count in (("train", 48), ("validation", 16)):
        rows = [f"the voyage was {words[str(i % 2)][i % 3]} and long,{i % 2}" for i in range(count)]
        (root / f"data/rotten_tomatoes/{split}.csv").write_text("sentence,label\n" + "\n".join(rows) + "\n")
    return root


def run_script(root, module, *args):
    """`python -m experiments.quality.<module> ARGS` in the copy, which shadows the real study."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", f"experiments.quality.{module}", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)


def test_missing_data_is_one_line_naming_data_dir(study_copy, tmp_path):
    """The news corpus and Rotten Tomatoes are not bundled: without them each script says, in one line, which flag
    to pass and which files the folder must hold, and --list needs no data."""
    empty = tmp_path / "empty"
    empty.mkdir()
    expected = {"run_study.py": ["news/train.jsonl", "news/validation.jsonl", "rotten_tomatoes/train.csv"],
                "short_inputs.py": ["news/train.jsonl", "news/validation.jsonl"],
                "feature_probes.py": ["rotten_tomatoes/train.csv", "rotten_tomatoes/validation.csv"]}
    for script, files in expected.items():
        out = run_script(study_copy, script[:-3], "--data_dir", str(empty))
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-3000:]
        assert f"{script}: error: " in out.stderr and "--data_dir DIR holding" in out.stderr, out.stderr
        assert all(f in out.stderr for f in files) and "experiments/README.md" in out.stderr, out.stderr
    finetune_only = run_script(study_copy, "run_study", "--stage", "finetune", "--data_dir", str(empty))
    assert finetune_only.returncode == 2 and "news/" not in finetune_only.stderr, finetune_only.stderr
    assert run_script(study_copy, "run_study", "--list", "--data_dir", str(empty)).returncode == 0


@pytest.fixture(scope="module")
def ran(study_copy):
    first = run_script(study_copy, "run_study")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    again = run_script(study_copy, "run_study")
    return study_copy, first, again


def test_run_study_pretrains_finetunes_and_records_every_command(ran):
    root, first, again = ran
    results = {p.stem: json.loads(p.read_text()) for p in (root / "experiments/quality/results").glob("*.json")}
    assert set(results) == {"roberta_n512_s0", "linformer_n512_k128_layerwise_s0"}
    for name, r in results.items():
        assert [p["step"] for p in r["curve"]] == [0, 2, 4] and r["perplexity"] == r["curve"][-1]["perplexity"]
        assert r["pretrain_command"].startswith("python train_mlm.py") and f"--seed 0" in r["pretrain_command"]
        assert "--per_device_train_batch_size 2" in r["pretrain_command"]  # 64 tokens per update at n=32
        assert "--train_file data/news/train.jsonl --validation_file data/news/validation" in r["pretrain_command"]
        assert ("--config_overrides hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64,"
                in r["pretrain_command"])
        assert set(r["finetune"]) == {"0"} and 0 <= r["finetune"]["0"]["accuracy"] <= 1
        assert (root / "experiments/checkpoints" / name / "model.safetensors").is_file()  # save_pretrained
    assert "intermediate_size=64,max_seq_length=32,projected_dim=8,projection_sharing=layerwise " in \
        results["linformer_n512_k128_layerwise_s0"]["pretrain_command"]
    variant = results["linformer_n512_k128_layerwise_s0"]["finetune_sqrt"]["0"]
    assert "--config_overrides projection_length_scaling=sqrt" in variant["command"]
    finetuned = root / "experiments/checkpoints/linformer_n512_k128_layerwise_s0_rt_sqrt_s0/config.json"
    assert json.loads(finetuned.read_text())["projection_length_scaling"] == "sqrt"
    assert "finetune_sqrt" not in results["roberta_n512_s0"]
    for reference in ("unigram", "rotten_tomatoes_majority"):
        assert (root / f"experiments/quality/results/reference/{reference}.json").is_file()
    # Finished work is skipped: the second invocation runs no command at all.
    assert again.returncode == 0 and "$ " not in again.stdout


def test_run_study_lists_and_rejects_unknown_runs(ran):
    root = ran[0]
    listed = run_script(root, "run_study", "--list")
    assert "linformer_n512_k128_layerwise_s0" in listed.stdout and "finetune_sqrt [0]" in listed.stdout
    bad = run_script(root, "run_study", "--only", "roberta_n512_s9")
    assert bad.returncode == 2 and "unknown run(s) roberta_n512_s9" in bad.stderr


def test_short_inputs_compares_scalings_on_identical_blocks(ran):
    root = ran[0]
    out = run_script(root, "short_inputs", "--lengths", "8", "32", "--tokens", "256")
    assert out.returncode == 0, out.stderr[-3000:]
    lin = json.loads((root / "experiments/quality/results/short_inputs/linformer_n512_k128_layerwise_s0.json").read_text())
    rob = json.loads((root / "experiments/quality/results/short_inputs/roberta_n512_s0.json").read_text())
    assert set(lin["lengths"]["8"]) == {"none", "sqrt", "linear"} and set(rob["lengths"]["8"]) == {"n/a"}
    # At L = n the scalings are the identity, so all three score exactly the same; below n they differ.
    assert len({v["loss"] for v in lin["lengths"]["32"].values()}) == 1
    assert len({v["loss"] for v in lin["lengths"]["8"].values()}) == 3
    assert lin["lengths"]["8"]["none"]["masked_tokens"] == rob["lengths"]["8"]["n/a"]["masked_tokens"]


def test_feature_probes_score_both_poolings_of_every_checkpoint(ran):
    root = ran[0]
    out = run_script(root, "feature_probes", "--train_examples", "40")
    assert out.returncode == 0, out.stderr[-3000:]
    lin = json.loads((root / "experiments/quality/results/feature_probes/linformer_n512_k128_layerwise_s0.json").read_text())
    rob = json.loads((root / "experiments/quality/results/feature_probes/roberta_n512_s0.json").read_text())
    assert set(lin["accuracy"]) == {"none", "sqrt"} and set(rob["accuracy"]) == {"n/a"}
    assert lin["train_examples"] == 40 and lin["validation_examples"] == 16
    for acc in [*lin["accuracy"].values(), *rob["accuracy"].values()]:
        assert set(acc) == {"first_token", "mean"} and all(0 <= a <= 1 for a in acc.values())


def test_report_writes_tables_plots_and_the_model_card_section(ran):
    root = ran[0]
    out = run_script(root, "render")
    assert out.returncode == 0, out.stderr[-3000:]
    report = (root / "experiments/quality/results.md").read_text()
    for text in ("## Every configuration", "| roberta_n512 | 32 |", "| linformer_n512_k128_layerwise | 32 | 8 |",
                 "## Targets", "## Commands", "finetune sqrt, seed 0", "not pretrained yet (0 of 2)",
                 "## Short inputs", "| linformer_n512_k128_layerwise_s0 | sqrt |", "Linear probes"):
        assert text in report, text
    assert (root / "experiments/quality/perplexity_curves.png").stat().st_size > 10_000
    card = (root / "model_card.md").read_text()
    assert "old" not in card and "### Every configuration" in card and card.endswith("## Limitations\n")
    assert "experiments/quality/perplexity_curves.png" in card
    (root / "model_card.md").write_text("# card without markers\n")
    broken = run_script(root, "render")
    assert broken.returncode != 0 and "lacks the markers" in broken.stderr
