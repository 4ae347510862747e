"""train_mlm.py end to end on CPU: recipes, bad input, a short run, resume after a kill, 2-process DDP."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from linformer_hf import script_utils as su

from conftest import REPO

sys.path.insert(0, str(REPO))
import train_mlm  # noqa: E402

MICRO = """\
model_type: {model_type}
model: {model}
train_file: [{corpus}]
tokenizer_vocab_size: 400
per_device_train_batch_size: 8
learning_rate: 3.0e-3
warmup_steps: 2
eval_steps: 0
logging_steps: 1
checkpointing_steps: 0
report_to: none
"""
SIZE = "hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 64"
LINFORMER = "{" + SIZE + ", max_seq_length: 64, projected_dim: 16}"
ROBERTA = "{" + SIZE + ", max_position_embeddings: 66}"  # n=64, positions numbered after pad id 1
NO_DROPOUT = ["--model.hidden_dropout_prob", "0", "--model.attention_probs_dropout_prob", "0"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The first 15 sections of the bundled Moby Dick (about 1,000 blocks of 64 tokens)."""
    path = tmp_path_factory.mktemp("corpus") / "moby15.jsonl"
    lines = (REPO / "data" / "moby_dick" / "chapters.jsonl").read_text().splitlines()[:15]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def micro(corpus, tmp_path_factory):
    folder = tmp_path_factory.mktemp("recipes")
    for name, model_type, model in [("micro", "linformer", LINFORMER), ("micro_roberta", "roberta", ROBERTA)]:
        (folder / f"{name}.yaml").write_text(MICRO.format(model_type=model_type, model=model, corpus=corpus))
    return folder


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    """main() runs in this process several times; each run needs Accelerate's singletons fresh."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


def run(micro, out, *flags, recipe="micro"):
    return train_mlm.main(["--config", str(micro / f"{recipe}.yaml"), "--output_dir", str(out), *flags])


def losses(out, key="train_loss"):
    return [r[key] for r in su.read_jsonl(Path(out) / "metrics.jsonl") if key in r]


# --- recipes ---------------------------------------------------------------------------------------


def test_no_arguments_is_the_tiny_recipe():
    defaults = su.parse_config(train_mlm.Args, [])
    tiny = su.parse_config(train_mlm.Args, ["--config", str(REPO / "configs" / "tiny.yaml")])
    assert defaults == tiny
    assert Path(defaults.train_file[0]) == REPO / "data" / "moby_dick" / "chapters.jsonl"
    assert defaults.model_type == "linformer" and defaults.tokenizer_name is None


RECIPES = sorted((REPO / "configs").glob("*.yaml"))


@pytest.mark.parametrize("recipe", RECIPES, ids=[p.stem for p in RECIPES])
def test_every_recipe_parses_into_a_valid_model(recipe):
    args = su.parse_config(train_mlm.Args, ["--config", str(recipe)])
    config = train_mlm.build_model_config(args)
    n = train_mlm.longest_input(config)
    assert (args.max_seq_length or n) <= n
    assert args.adam_beta2 == 0.98 and args.adam_epsilon == 1e-6 and args.weight_decay == 0.01
    if args.model_type == "linformer":
        assert all(k <= n for k in config.projected_dims)


def test_paper_recipes_cover_the_grid():
    """RoBERTa-base size with n=512, k in {128, 256} x every sharing mode; n=1024..4096 with k=256;
    a standard-attention RoBERTa of the same size, trained the same way."""
    found = set()
    for recipe in RECIPES:
        args = su.parse_config(train_mlm.Args, ["--config", str(recipe)])
        config = train_mlm.build_model_config(args)
        if config.hidden_size != 768:
            continue
        if args.model_type == "roberta":
            found.add(("roberta", train_mlm.longest_input(config)))
        else:
            found.add((config.max_seq_length, config.projected_dim, config.projection_sharing))
    for k in (128, 256):
        for sharing in ("none", "headwise", "key_value", "layerwise"):
            assert (512, k, sharing) in found
    for n in (1024, 2048, 4096):
        assert any(f[:2] == (n, 256) for f in found)
    assert ("roberta", 512) in found


# --- bad input: a clear error before any training ------------------------------------------------


def _bad_inputs(tmp_path, micro):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "a_file").write_text("x")
    ckpt = tmp_path / "old_run" / "checkpoints" / "step_5"
    ckpt.mkdir(parents=True)
    (ckpt / su.STATE_FILE).write_text(json.dumps({"step": 5}))
    return {
        "missing file": (["--train_file", str(tmp_path / "nope.jsonl")], r"--train_file .*nope.jsonl: no such file"),
        "empty file": (["--train_file", str(tmp_path / "empty.jsonl")], r"--train_file .*empty.jsonl: file is empty"),
        "empty validation": (["--validation_file", str(tmp_path / "empty.jsonl")], "--validation_file .*file is empty"),
        "block above n": (["--max_seq_length", "128"], "--max_seq_length 128 exceeds the model's longest input n=64"),
        "k above n": (["--model.projected_dim", "128"], r"--model: .*`projected_dim`=128 is invalid"),
        "unknown model field": (["--model.hidden_sise", "3"], "did you mean `hidden_size`"),
        "unwritable output": (["--output_dir", str(tmp_path / "a_file" / "out")], "--output_dir .* not a writable"),
        "earlier run": (["--output_dir", str(tmp_path / "old_run")], "holds checkpoints of an earlier run"),
        "batch arithmetic": (["--total_batch_size", "12"], "--total_batch_size 12 is not a multiple of"),
        "push without id": (["--push_to_hub"], "--push_to_hub needs --hub_model_id"),
        "bad checkpoint": (["--resume_from_checkpoint", str(tmp_path)], "--resume_from_checkpoint .*not a checkpoint"),
        "tokenizer too big": (["--model.vocab_size", "100"], r"does not fit the model config: its vocabulary has \d+"),
        "unknown tracker": (["--report_to", "tensorbord"], "unknown --report_to tracker"),
        "all warmup": (["--max_steps", "2"], "--warmup_steps 2 leaves no updates for the polynomial decay"),
    }


BAD = ["missing file", "empty file", "empty validation", "block above n", "k above n", "unknown model field",
       "unwritable output", "earlier run", "batch arithmetic", "push without id", "bad checkpoint",
       "tokenizer too big", "unknown tracker", "all warmup"]


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_a_clear_error_before_training(case, tmp_path, micro):
    flags, message = _bad_inputs(tmp_path, micro)[case]
    out = tmp_path / "out"
    with pytest.raises(su.UsageError, match=message):
        run(micro, out, *flags)
    assert not (out / "metrics.jsonl").exists() and not (out / "checkpoints").exists()


def test_unknown_flag_and_recipe_key_are_errors(tmp_path, micro, capsys):
    with pytest.raises(SystemExit):
        run(micro, tmp_path, "--max_train_steps", "5")
    assert "unrecognized arguments: --max_train_steps" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("base: " + str(micro / "micro.yaml") + "\nlearning_rte: 0.1\n")
    with pytest.raises(SystemExit):
        train_mlm.main(["--config", str(bad)])
    assert "unknown key `learning_rte`" in capsys.readouterr().err


def test_command_line_error_is_one_line_not_a_traceback(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "train_mlm.py"), "--max_seq_length", "4096",
                             "--output_dir", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode != 0
    assert "train_mlm.py: error: --max_seq_length 4096 exceeds the model's longest input n=128" in result.stderr
    assert "Traceback" not in result.stderr


# --- training --------------------------------------------------------------------------------------


def test_short_run_learns_and_saves_a_loadable_model(tmp_path, micro):
    from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline

    out = tmp_path / "run"
    final = run(micro, out, "--max_steps", "30", "--eval_steps", "15", "--checkpointing_steps", "10",
                "--keep_last_checkpoints", "2", "--report_to", "tensorboard")
    rows = su.read_jsonl(out / "metrics.jsonl")
    evals = [r for r in rows if "eval_perplexity" in r]
    assert [r["step"] for r in evals] == [0, 15, 30]  # untrained, periodic, final
    assert evals[-1]["eval_perplexity"] < 0.5 * evals[0]["eval_perplexity"]
    assert final["eval_perplexity"] == evals[-1]["eval_perplexity"]
    train = [r for r in rows if "train_loss" in r]
    assert [r["step"] for r in train] == list(range(1, 31))
    assert all(r["tokens_per_second"] > 0 and r["peak_memory_gb"] > 0 for r in train)
    assert train[-1]["tokens_seen"] >= 30 * 8 * 60
    assert [p.name for p in su.list_checkpoints(out / "checkpoints")] == ["step_20", "step_30"]
    assert list((out / "logs").rglob("events.out.tfevents*"))  # TensorBoard

    card = (out / "README.md").read_text()
    assert "pipeline_tag: fill-mask" in card and "eval_perplexity" in card and "projected_dim: 16" in card
    assert (out / "model.safetensors").exists() and (out / "modeling_linformer.py").exists()
    model = AutoModelForMaskedLM.from_pretrained(out)
    assert type(model).__name__ == "LinformerForMaskedLM" and model.config.projected_dim == 16
    assert len(AutoTokenizer.from_pretrained(out)) <= model.config.vocab_size
    predictions = pipeline("fill-mask", model=str(out))("Call me <mask>.")
    assert len(predictions) == 5 and all(p["sequence"].startswith("Call me") for p in predictions)


def test_gradient_accumulation_matches_one_big_batch(tmp_path, micro):
    """An update is 8 sequences whether as one batch of 8 or two of 4: the loss is normalised over
    the update's masked tokens, so the two runs follow the same trajectory."""
    run(micro, tmp_path / "big", "--max_steps", "3", *NO_DROPOUT)
    run(micro, tmp_path / "accum", "--max_steps", "3", "--per_device_train_batch_size", "4",
        "--total_batch_size", "8", *NO_DROPOUT)
    assert losses(tmp_path / "big") == pytest.approx(losses(tmp_path / "accum"), rel=1e-5)
    big, accum = load_file(tmp_path / "big" / "model.safetensors"), load_file(tmp_path / "accum" / "model.safetensors")
    assert all(torch.allclose(big[k], accum[k], atol=1e-6) for k in big)


def test_roberta_baseline_trains_with_the_same_script(tmp_path, micro):
    from transformers import AutoModelForMaskedLM

    run(micro, tmp_path, "--max_steps", "4", recipe="micro_roberta")
    assert type(AutoModelForMaskedLM.from_pretrained(tmp_path)).__name__ == "RobertaForMaskedLM"
    with pytest.raises(su.UsageError, match="--max_seq_length 128 exceeds the model's longest input n=64"):
        run(micro, tmp_path / "too_long", "--max_seq_length", "128", recipe="micro_roberta")


def test_streaming_corpus(tmp_path, micro):
    run(micro, tmp_path, "--max_steps", "3", "--streaming", "--tokenizer_train_docs", "10",
        "--streaming_validation_docs", "2")
    assert len(losses(tmp_path)) == 3 and (tmp_path / "model.safetensors").exists()


def test_offline_push_fails_after_the_local_save(tmp_path, micro, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(su.UsageError, match="--push_to_hub: uploading to someone/tiny failed .*Nothing is lost"):
        run(micro, tmp_path, "--max_steps", "3", "--push_to_hub", "--hub_model_id", "someone/tiny")
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "README.md").exists()


# --- never lose work: resume after a kill ----------------------------------------------------------


def test_resume_latest_continues_and_refuses_another_layout(tmp_path, micro):
    run(micro, tmp_path, "--max_steps", "4", "--checkpointing_steps", "2", "--keep_last_checkpoints", "1")
    assert [p.name for p in su.list_checkpoints(tmp_path / "checkpoints")] == ["step_4"]
    with pytest.raises(su.UsageError, match="written with .*'per_device_train_batch_size': 8.*resume with the same"):
        run(micro, tmp_path, "--max_steps", "6", "--resume_from_checkpoint", "latest",
            "--per_device_train_batch_size", "4", "--total_batch_size", "8")
    run(micro, tmp_path, "--max_steps", "6", "--resume_from_checkpoint", "latest", "--checkpointing_steps", "2")
    assert [r["step"] for r in su.read_jsonl(tmp_path / "metrics.jsonl") if "train_loss" in r] == [1, 2, 3, 4, 5, 6]
    assert json.loads((tmp_path / "checkpoints" / "step_6" / su.STATE_FILE).read_text())["tokens_seen"] > 6 * 8 * 50


def script(*flags):
    return [sys.executable, str(REPO / "train_mlm.py"), *flags]


@pytest.mark.slow
def test_resume_after_kill_reaches_the_same_weights(tmp_path, micro):
    """Kill a run after its checkpoint at step 3; resuming it to step 6 must give the weights of an
    uninterrupted 6-step run, bit for bit (dropout on: the RNG state is restored too). A constant
    learning rate lets the killed run have a longer horizon, so that it is still training when killed."""
    common = ["--config", str(micro / "micro.yaml"), "--lr_scheduler_type", "constant_with_warmup",
              "--checkpointing_steps", "3"]
    subprocess.run(script(*common, "--max_steps", "6", "--output_dir", str(tmp_path / "straight")),
                   check=True, capture_output=True)

    killed = tmp_path / "killed"
    proc = subprocess.Popen(script(*common, "--max_steps", "100000", "--output_dir", str(killed)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (killed / "checkpoints" / "step_3" / su.STATE_FILE).exists():
        assert proc.poll() is None and time.time() < deadline, "the run ended before its first checkpoint"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    resumed = subprocess.run(script(*common, "--max_steps", "6", "--output_dir", str(killed),
                                    "--resume_from_checkpoint", str(killed / "checkpoints" / "step_3")),
                             check=True, capture_output=True, text=True)
    assert "Resumed from" in resumed.stdout and "step 3" in resumed.stdout
    straight, again = load_file(tmp_path / "straight" / "model.safetensors"), load_file(killed / "model.safetensors")
    assert straight.keys() == again.keys() and all(torch.equal(straight[k], again[k]) for k in straight)
    assert losses(killed) == losses(tmp_path / "straight")  # the log has each step once, as before


# --- distributed: 2-process data parallel through accelerate launch --------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_match_one_process(tmp_path, micro):
    """`accelerate launch` with 2 CPU processes (gloo) and 4 sequences each = 1 process with 8: same
    losses and weights (dropout off, as it draws different numbers on each process), and both ranks
    end with identical weights (the script checks and says so)."""
    run(micro, tmp_path / "one", "--max_steps", "4", *NO_DROPOUT)
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        ["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port()),
         *script("--config", str(micro / "micro.yaml"), "--max_steps", "4", "--per_device_train_batch_size", "4",
                 "--checkpointing_steps", "2", "--output_dir", str(tmp_path / "two"), *NO_DROPOUT)[1:]],
        env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 process(es), 8 sequences per update" in result.stdout
    assert "Weights identical on all 2 processes" in result.stdout
    assert losses(tmp_path / "two") == pytest.approx(losses(tmp_path / "one"), rel=1e-5)
    assert losses(tmp_path / "two", "eval_loss") == pytest.approx(losses(tmp_path / "one", "eval_loss"), rel=1e-5)
    one, two = load_file(tmp_path / "one" / "model.safetensors"), load_file(tmp_path / "two" / "model.safetensors")
    assert all(torch.allclose(one[k], two[k], atol=1e-6) for k in one)
    step_2 = tmp_path / "two" / "checkpoints" / "step_2"
    assert (step_2 / "random_states_0.pkl").exists() and (step_2 / "random_states_1.pkl").exists()

    # An error found on the main process only (the tokenizer is checked there first) stops both ranks
    # with the message, instead of leaving rank 1 waiting at a barrier.
    result = subprocess.run(
        ["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port()),
         *script("--config", str(micro / "micro.yaml"), "--model.vocab_size", "100",
                 "--output_dir", str(tmp_path / "bad"))[1:]],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "does not fit the model config" in result.stderr
