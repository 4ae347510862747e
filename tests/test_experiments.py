"""experiments/quality/: the study's run table, and run_study -> render end to end on a copy of the folder whose
study.py keeps the real helpers but shrinks the model, data and budget to seconds."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from scipy import stats

from experiments.quality import study

REPO = Path(__file__).resolve().parents[1]


def test_study_covers_every_comparison_of_the_issue_under_one_budget():
    runs = {r["name"]: r for r in study.RUNS}
    arch = {(r["model_type"], r["n"], r.get("k"), r.get("sharing")) for r in study.RUNS}
    n, k = study.N, study.K  # the paper's n = 512 and k = 128, scaled alike
    assert k * 512 == n * 128
    assert ("roberta", n, None, None) in arch
    assert {("linformer", n, k * f, "layerwise") for f in (0.5, 1, 2)} <= arch
    assert {("linformer", n, k, s) for s in ("none", "headwise", "key_value", "layerwise")} <= arch
    assert {("linformer", n * f, k, "layerwise") for f in (1, 2, 4)} <= arch
    assert study.BASELINE == f"roberta_n{n}" and study.LINFORMER == f"linformer_n{n}_k{k}_layerwise"
    for name in (study.BASELINE, study.LINFORMER):
        assert {runs[f"{name}_s{s}"]["seed"] for s in (0, 1, 2)} == {0, 1, 2}
    # Every paper row compared names a run of the study.
    paper = yaml.safe_load((REPO / "experiments/quality/paper_numbers.yaml").read_text())
    assert {row["ours"] for row in paper["table2"]["rows"] if row.get("ours")} <= {study.name_of(r) for r in study.RUNS}
    assert len(study.FINETUNE_SEEDS) >= 3
    # The budget is shared: runs differ only in attention, n, seed and the batch that keeps tokens per update.
    assert all(study.TOKENS_PER_UPDATE % r["n"] == 0 for r in study.RUNS)
    shared_fields = set(study.PRETRAIN["config_overrides"])
    assert not any(shared_fields & set(r["config_overrides"]) for r in study.RUNS)
    # The corpora are not bundled: no run reads them from anywhere but --data_dir.
    assert not any(key.endswith("_file") for key in [*study.PRETRAIN, *study.FINETUNE])
    # Resumable, and validated at one fixed masking rate whatever the training rate.
    assert study.PRETRAIN["checkpointing_steps"] > 0 and study.PRETRAIN["eval_mlm_probability"] == 0.15
    assert (study.PRETRAIN["eval_mask_replace_prob"], study.PRETRAIN["eval_random_replace_prob"]) == (1.0, 0.0)
    assert not any(key in study.PRETRAIN for key in ("resume_from_checkpoint", "output_dir", "tokenizer_name"))


TINY_STUDY = '''
exec(open({real!r}).read())  # the real study's helpers, bound to this module's RUNS

DATA = "data"
PRETRAIN_DATA = {{"train_file": "news/train.jsonl", "validation_file": "news/validation.jsonl"}}
RUNS_DIR = "runs"  # relative to where the scripts run: the copy's root
TOKENIZER_VOCAB_SIZE = 300
TOKENS_PER_UPDATE = 64
PRETRAIN = {{**PRETRAIN, "warmup_ratio": 0.25, "max_steps": 4, "eval_steps": 2, "checkpointing_steps": 2,
            "save_total_limit": 2, "logging_steps": 1, "mixed_precision": "no",
            "config_overrides": {{"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                                 "intermediate_size": 64}}}}
FINETUNE = {{**FINETUNE, "max_seq_length": 32, "per_device_train_batch_size": 8, "mixed_precision": "no",
            "logging_steps": 1}}
FINETUNE_SEEDS = (0,)
N, K = 32, 8
BASELINE, LINFORMER = name_of(roberta()), name_of(linformer())
RUNS = [run(roberta(), 0), run(linformer(), 0), run(peer(), 0), run(linformer(projection="conv"), 0)]
EXTENDED_STEPS, EXTENDED = (2, 4, 6), [LINFORMER + "_s0"]
'''


def make_study_copy(root):
    """A repository-shaped folder: the real scripts and configs, a tiny study.py, small real text."""
    (root / "experiments/quality").mkdir(parents=True)
    for name in ("__init__.py", "quality/__init__.py", "quality/run_study.py", "quality/render.py",
                 "quality/record_pilot.py", "quality/order_check.py", "quality/projection_check.py",
                 "quality/paper_numbers.yaml", "quality/peer.py", "quality/modeling_peer.py"):
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


@pytest.fixture(scope="module")
def study_copy(tmp_path_factory):
    return make_study_copy(tmp_path_factory.mktemp("study") / "repo")


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
    out = run_script(study_copy, "run_study", "--data_dir", str(empty))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-3000:]
    assert "run_study.py: error: " in out.stderr and "--data_dir DIR holding" in out.stderr, out.stderr
    files = ["news/train.jsonl", "news/validation.jsonl", "rotten_tomatoes/train.csv"]
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
    assert set(results) == {"roberta_n32_s0", "linformer_n32_k8_layerwise_s0", "lucidrains_n32_k8_share_kv_s0",
                            "linformer_n32_k8_layerwise_conv_s0"}
    for name, r in results.items():
        assert [p["step"] for p in r["curve"]] == [0, 2, 4] and r["perplexity"] == r["curve"][-1]["perplexity"]
        tokens = [p["tokens_seen"] for p in r["curve"]]
        assert tokens[0] == 0 < tokens[1] < tokens[2] <= 4 * 64  # 64 tokens per update at most
        assert r["pretrain_command"].startswith("python train_mlm.py") and "--seed 0" in r["pretrain_command"]
        assert "--per_device_train_batch_size 2" in r["pretrain_command"]  # 64 tokens per update at n=32
        assert "--train_file data/news/train.jsonl --validation_file data/news/validation" in r["pretrain_command"]
        peer = name.startswith("lucidrains")
        assert peer == (f"--model_name_or_path runs/{name}_start --trust_remote_code true" in r["pretrain_command"])
        assert peer != ("--config_overrides hidden_size=32,num_hidden_layers=1,num_attention_heads=2,"
                        "intermediate_size=64," in r["pretrain_command"])
        assert f"--tokenizer_name runs/tokenizer" in r["pretrain_command"]
        assert f"--output_dir runs/{name} --resume_from_checkpoint latest" in r["pretrain_command"]
        assert r["pretrain_seconds"] > 0 and r["tokens_per_second"] > 0
        assert set(r["finetune"]) == (set() if peer else {"0"})  # the peer has no padding mask to finetune with
        assert all(0 <= f["accuracy"] <= 1 for f in r["finetune"].values())
        assert (root / "runs" / name / "model.safetensors").is_file()  # save_pretrained, outside the results
        assert sorted(c.name for c in (root / "runs" / name / "checkpoints").iterdir()) == ["checkpoint_2", "checkpoint_4"]
        # What it learnt: word order for every run, E/F's locality for a Linformer, with the commands.
        assert r["order_check"]["command"] == f"python -m experiments.quality.order_check runs/{name} --block_size 32"
        assert r["order_check"]["block_size"] == 32 and r["order_check"]["perplexity_shuffled"] > 1
        assert ("projection_check" in r) == (name.startswith("linformer") and "conv" not in name)
    # The peer trained lucidrains' attention (its own code, in its folder), E starting as window means.
    peer_config = json.loads((root / "runs/lucidrains_n32_k8_share_kv_s0/config.json").read_text())
    assert peer_config["model_type"] == "linformer_peer" and (root / "runs/lucidrains_n32_k8_share_kv_s0/modeling_peer.py").is_file()
    from safetensors.torch import load_file
    start = load_file(root / "runs/lucidrains_n32_k8_share_kv_s0_start/model.safetensors")
    assert torch.equal(start["linformer.encoder.layer.0.attention.self.peer.proj_k"][:4, 0], torch.full((4,), 0.25))
    assert "projection_type=conv" in results["linformer_n32_k8_layerwise_conv_s0"]["pretrain_command"]
    assert "intermediate_size=64,max_seq_length=32,projected_dim=8,projection_sharing=layerwise,projection_init=window_mean " in \
        results["linformer_n32_k8_layerwise_s0"]["pretrain_command"]
    unigram = json.loads((root / "experiments/quality/results/reference/unigram.json").read_text())
    assert unigram["unigram_perplexity"] > 1 and unigram["vocab_size"] <= 300
    rt = json.loads((root / "experiments/quality/results/reference/rotten_tomatoes.json").read_text())
    assert rt["majority"]["validation_accuracy"] == 0.5  # 8 of each label
    assert rt["tfidf_logistic_regression"]["validation_accuracy"] == 1.0  # the words give the labels away
    # Finished work is skipped: the second invocation runs no command at all.
    assert again.returncode == 0 and "$ " not in again.stdout


def test_pilots_are_recorded_from_their_run_folder_and_word_order_is_checked(ran):
    """record_pilot.py turns a train_mlm.py folder into results/pilots/NAME.json (its resolved command, curve, ratio
    to the unigram reference), refusing a folder that is not one; order_check.py scores a model on validation blocks
    as written and shuffled; the two-neighbour count reference lies between 1 and the unigram's."""
    root = ran[0]
    run = root / "runs/roberta_n32_s0"
    out = run_script(root, "record_pilot", str(run), "--name", "P", "--what", "a pilot", "--finetune",
                     str(root / "runs/roberta_n32_s0_rt_s0"))
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.loads((root / "experiments/quality/results/pilots/P.json").read_text())
    unigram = json.loads((root / "experiments/quality/results/reference/unigram.json").read_text())["unigram_perplexity"]
    assert [p["step"] for p in record["curve"]] == [0, 2, 4] and record["what"] == "a pilot"
    assert record["final_vs_unigram"] == round(record["curve"][-1]["perplexity"] / unigram, 3)
    assert "--eval_mask_replace_prob 1.0 --eval_random_replace_prob 0.0" in record["pretrain_command"]
    assert "--max_steps 4 " in record["pretrain_command"] and "num_parameters" not in record["pretrain_command"]
    results = json.loads((root / "experiments/quality/results/roberta_n32_s0.json").read_text())
    (key, tuned), = record["finetune"].items()
    assert key.startswith("lr ") and key.endswith(", seed 0")
    assert tuned["accuracy"] == results["finetune"]["0"]["accuracy"] and tuned["seed"] == 0
    assert tuned["command"].startswith("OMP_NUM_THREADS=1 python finetune_glue.py") and "--task " not in tuned["command"]
    (root / "experiments/quality/results/pilots/P.json").unlink()
    twice = run_script(root, "record_pilot", str(run), "--name", "Q", "--what", "x", "--finetune",
                       str(root / "runs/roberta_n32_s0_rt_s0"), str(root / "runs/roberta_n32_s0_rt_s0"))
    assert twice.returncode == 2 and "names two runs of lr" in twice.stderr and "pass each once" in twice.stderr
    bad = run_script(root, "record_pilot", str(root / "runs"), "--name", "Q", "--what", "x")
    assert bad.returncode == 2 and "has no metrics.jsonl: not a finished train_mlm.py output folder" in bad.stderr
    check = run_script(root, "order_check", str(run), "--block_size", "32", "--blocks", "8", "--data_dir", "data")
    assert check.returncode == 0, check.stderr[-3000:]
    scores = json.loads(check.stdout.strip().splitlines()[-1])
    assert scores["blocks"] == 8 and scores["perplexity_as_written"] > 1 and scores["perplexity_shuffled"] > 1
    neighbours = json.loads((root / "experiments/quality/results/reference/neighbours.json").read_text())
    assert 1 < neighbours["neighbours_perplexity"] < unigram


def test_projection_check_tells_a_random_mixture_from_a_local_average(ran, tmp_path):
    """projection_check.py on the study's Linformer (E started as window means and trained 4 updates: still local),
    then on the same model with E set exactly to window means (whose three numbers are known exactly) and to a
    Gaussian matrix (near the random yardstick); a RoBERTa folder is refused in one line."""
    from safetensors.torch import load_file, save_file

    root = ran[0]
    run = root / "runs/linformer_n32_k8_layerwise_s0"

    def check(folder):
        out = run_script(root, "projection_check", str(folder))
        assert out.returncode == 0, out.stderr[-3000:]
        report = json.loads(out.stdout.strip().splitlines()[-1])
        assert (report["n"], report["k"]) == (32, 8) and set(report["projections"]) == {"shared[0]", "random"}
        return report["projections"]["shared[0]"], report["projections"]["random"]

    trained, random = check(run)
    assert trained["positions_read"] < 8 < 0.5 * 32 < random["positions_read"]
    assert trained["nearby_share"] > 0.8 > 0.3 > random["nearby_share"]

    def with_projection(name, matrix):
        folder = tmp_path / name
        shutil.copytree(run, folder, ignore=shutil.ignore_patterns("checkpoints"))
        weights = load_file(folder / "model.safetensors")
        weights[next(k for k in weights if k.endswith("projections.shared"))] = matrix[None]
        save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
        return folder

    local = with_projection("local", torch.kron(torch.eye(8), torch.full((1, 4), 0.25)))  # slot j: 4j..4j+3
    assert check(local)[0] == {"positions_read": 4.0, "nearby_share": 1.0, "average_part": 1.0}
    gaussian = with_projection("gaussian", torch.randn(8, 32, generator=torch.Generator().manual_seed(1)))
    mixed = check(gaussian)[0]
    assert abs(mixed["positions_read"] - random["positions_read"]) < 0.25 * 32
    assert mixed["nearby_share"] < 0.3 and mixed["average_part"] < 0.5
    refused = run_script(root, "projection_check", str(root / "runs/roberta_n32_s0"))
    assert refused.returncode == 2 and "is a 'roberta' model; only a Linformer has projections" in refused.stderr


def test_run_study_resumes_a_cut_run_and_finishes_it(tmp_path):
    """A run cut after its first checkpoint (no results file, no final model, its last checkpoint lost) continues
    from that checkpoint when run_study is run again, with the same command, and ends with the uncut run's curve."""
    root = make_study_copy(tmp_path / "repo")
    name, runs, results = "roberta_n32_s0", tmp_path / "repo/runs", tmp_path / "repo/experiments/quality/results"
    whole = run_script(root, "run_study", "--only", name, "--stage", "pretrain")
    assert whole.returncode == 0, whole.stderr[-3000:]
    uncut = json.loads((results / f"{name}.json").read_text())
    (results / f"{name}.json").unlink()
    shutil.rmtree(runs / name / "checkpoints" / "checkpoint_4")
    (runs / name / "model.safetensors").unlink()
    resumed = run_script(root, "run_study", "--only", name, "--stage", "pretrain")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    log = (runs / f"{name}.pretrain.log").read_text()
    assert log.count("\n$ ") == 2 and "Resumed from" in log and "checkpoint_2" in log
    again = json.loads((results / f"{name}.json").read_text())
    assert again["curve"] == uncut["curve"] and again["pretrain_command"] == uncut["pretrain_command"]


def test_extend_stops_at_every_point_and_matches_the_uninterrupted_run(ran):
    """--extend trains an extended run again to each point in turn, resuming each time with a higher --max_steps:
    its curve up to the study's last update is the uninterrupted run's, update for update, and every point has its
    checks and finetuning seeds. Run again, it has nothing left to do."""
    root = ran[0]
    name = "linformer_n32_k8_layerwise_s0"
    out = run_script(root, "run_study", "--extend", "--only", name)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    extended = json.loads((root / f"experiments/quality/results/extended/{name}.json").read_text())
    study_run = json.loads((root / f"experiments/quality/results/{name}.json").read_text())
    assert list(extended["points"]) == ["2", "4", "6"] and extended["mixed_precision"] == "no"
    assert [p["step"] for p in extended["curve"]] == [0, 2, 4, 6]
    assert extended["curve"][:3] == study_run["curve"]  # stopped at 2 and 4 and resumed: the same updates
    for steps, point in extended["points"].items():
        assert f"--max_steps {steps} " in point["pretrain_command"], point["pretrain_command"]
        assert list(point["finetune"]) == ["0"] and "order_check" in point and "projection_check" in point
        assert point["perplexity"] == next(p["perplexity"] for p in extended["curve"] if p["step"] == int(steps))
    log = (root / f"runs/extended/{name}.pretrain.log").read_text()
    assert log.count("Resumed from") == 2, log[-3000:]
    again = run_script(root, "run_study", "--extend", "--only", name)
    assert again.returncode == 0 and "$" not in again.stdout, again.stdout[-3000:]
    # Only the runs of study.EXTENDED extend, and --mixed_precision belongs to --extend.
    other = run_script(root, "run_study", "--extend", "--only", "roberta_n32_s0")
    assert other.returncode == 2 and "only these runs are extended: " + name in other.stderr, other.stderr
    alone = run_script(root, "run_study", "--mixed_precision", "no")
    assert alone.returncode == 2 and "--mixed_precision is for --extend" in alone.stderr, alone.stderr


def test_run_study_lists_and_rejects_unknown_runs(ran):
    root = ran[0]
    listed = run_script(root, "run_study", "--list")
    assert "linformer_n32_k8_layerwise_s0" in listed.stdout and "finetuning seeds: [0]" in listed.stdout
    bad = run_script(root, "run_study", "--only", "roberta_n32_s9")
    assert bad.returncode == 2 and "unknown run(s) roberta_n32_s9" in bad.stderr


def test_exact_short_path_finetuning_reads_short_inputs_exactly_and_render_shows_it(ran):
    """run_study.py --exact_short_path finetunes the Linformer runs (only) with the exact short path, skips
    finished seeds when run again, and render.py sets its accuracy beside the run's own."""
    root = ran[0]
    out = run_script(root, "run_study", "--exact_short_path", "--finetune_seeds", "0")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (record,) = [json.loads(p.read_text()) for p in (root / "experiments/quality/results/exact_rt").glob("*.json")]
    assert record["name"] == "linformer_n32_k8_layerwise_s0" and set(record["finetune"]) == {"0"}
    assert "--config_overrides exact_attention_length=32" in record["finetune"]["0"]["command"]
    tuned = json.loads((root / "runs/linformer_n32_k8_layerwise_s0_rt_exact_s0/config.json").read_text())
    assert tuned["exact_attention_length"] == 32 and tuned["attention_type"] == "projected"
    again = run_script(root, "run_study", "--exact_short_path", "--finetune_seeds", "0")
    assert again.returncode == 0 and "exact short path" not in again.stdout
    assert run_script(root, "render").returncode == 0
    report = (root / "experiments/quality/results.md").read_text()
    assert "## Short inputs read exactly" in report and "| linformer_n32_k8_layerwise_s0 | " in report


def test_report_writes_tables_plots_and_the_model_card_section(ran):
    root = ran[0]
    pilots = root / "experiments/quality/results/pilots"
    pilots.mkdir(exist_ok=True)
    (pilots / "A.json").write_text(json.dumps({
        "name": "A", "what": "a pilot", "curve": [{"step": 0, "tokens_seen": 0, "perplexity": 300.0}],
        "tokens_seen": 1000, "tokens_per_second_median": 100, "final_perplexity": 250.0, "final_vs_unigram": 0.2,
        "finetune": {"1e-4": {"accuracy": 0.7}}, "pretrain_command": "python train_mlm.py --pilot"}))
    # A second pretraining seed of the baseline and of the Linformer, each e^0.2 times its first: perplexity is
    # averaged over the loss, so the baseline shows exp(l + 0.1) with bounds exp(l + 0.1 -+ t(0.975, 1) x 0.2 / 2),
    # the Linformer gap is read on the losses (Welch's t) and its verdict from that interval.
    first = json.loads((root / "experiments/quality/results/roberta_n32_s0.json").read_text())
    assert first["hardware"].startswith("CPU, ")  # run_study.py records where it trained
    loss, half = math.log(first["perplexity"]), stats.t.ppf(0.975, 1) * 0.2 / 2
    second = {**first, "name": "roberta_n32_s1", "perplexity": first["perplexity"] * math.exp(0.2)}
    (root / "experiments/quality/results/roberta_n32_s1.json").write_text(json.dumps(second))
    lin = json.loads((root / "experiments/quality/results/linformer_n32_k8_layerwise_s0.json").read_text())
    lin = {**lin, "perplexity": first["perplexity"] * math.exp(3)}  # far above the baseline: the 5% target missed
    (root / "experiments/quality/results/linformer_n32_k8_layerwise_s0.json").write_text(json.dumps(lin))
    (root / "experiments/quality/results/linformer_n32_k8_layerwise_s1.json").write_text(json.dumps(
        {**lin, "name": "linformer_n32_k8_layerwise_s1", "perplexity": lin["perplexity"] * math.exp(0.2)}))
    out = run_script(root, "render")
    assert out.returncode == 0, out.stderr[-3000:]
    report = (root / "experiments/quality/results.md").read_text()
    assert (f"| {math.exp(loss + 0.1):.1f} ({math.exp(loss + 0.1 - half):.1f}-{math.exp(loss + 0.1 + half):.1f}) |"
            in report)
    t2 = stats.t.ppf(0.975, 2) * (0.02 / 2 + 0.02 / 2) ** 0.5  # Welch: equal spreads, 2 degrees of freedom
    assert (f"perplexity within 5% of the baseline's | {100 * (math.exp(3) - 1):+.1f}% "
            f"({100 * (math.exp(3 - t2) - 1):+.1f} to {100 * (math.exp(3 + t2) - 1):+.1f}), 2 vs 2 pretraining seeds | "
            f"MISSED |") in report
    assert f"| {first['hardware']} | 6 |" in report  # the Cost table by hardware: the six runs above
    for text in ("## Every configuration", "| roberta_n32 | 32 |", "## What the models learnt", "| roberta_n32_s0 | ", "| linformer_n32_k8_layerwise | 32 | 8 |",
                 "## Targets (issue 34)", "roberta_n32 perplexity <= 0.3 x unigram", "TF-IDF features",
                 "## Cost", "## Commands", "finetuning seed 0", "not pretrained yet (0 of 2)",
                 "| A | a pilot | 1,000 | 100 | 250.0 | 0.200 | 70.0% (1e-4) |", "python train_mlm.py --pilot"):
        assert text in report, text
    assert (root / "experiments/quality/perplexity_curves.png").stat().st_size > 10_000
    card = (root / "model_card.md").read_text()
    assert "old" not in card and "### Every configuration" in card and card.endswith("## Limitations\n")
    assert "experiments/quality/perplexity_curves.png" in card and "## Pilots" not in card
    (root / "model_card.md").write_text("# card without markers\n")
    broken = run_script(root, "render")
    assert broken.returncode != 0 and "lacks the markers" in broken.stderr
