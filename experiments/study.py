"""Every run of the small-scale quality study: one table, read by run_study.py and report.py.

Each run is pretrained with train_mlm.py on the news corpus under an identical budget (same tokenizer,
tokens per update, updates, learning-rate schedule, evaluation points), then finetuned with
finetune_glue.py on Rotten Tomatoes. Only the attention (and n, for the length study) changes.
"""

DATA = "../shared/data"
TOKENIZER = "experiments/checkpoints/tokenizer"     # trained once on the news train split (run_study.py)
TOKENIZER_VOCAB_SIZE = 8192

TOKENS_PER_UPDATE = 4096                            # batch = TOKENS_PER_UPDATE // n sequences of n tokens

# Same for every run. Everything here is passed to train_mlm.py as --key value.
PRETRAIN = {
    "train_file": f"{DATA}/news/train.jsonl.gz",
    "validation_file": f"{DATA}/news/validation.jsonl.gz",
    "tokenizer_name": TOKENIZER,
    "model.hidden_size": 256, "model.num_hidden_layers": 4, "model.num_attention_heads": 4,
    "model.intermediate_size": 1024,
    "learning_rate": 1e-3, "lr_scheduler_type": "polynomial", "warmup_steps": 20, "max_steps": 200,
    "per_device_eval_batch_size": 16,
    "eval_steps": 40, "logging_steps": 10, "checkpointing_steps": 0,
    "mixed_precision": "bf16", "report_to": "none",
}

# finetune_glue.py on Rotten Tomatoes: short, and evaluated once at the end (no best-epoch selection on
# validation, which is the only labelled held-out split we have).
FINETUNE = {
    "train_file": f"{DATA}/rotten_tomatoes/train.csv",
    "validation_file": f"{DATA}/rotten_tomatoes/validation.csv",
    "text_column": "sentence", "label_column": "label",
    "max_seq_length": 128, "learning_rate": 1e-4, "num_train_epochs": 2, "per_device_train_batch_size": 32,
    "eval_steps": 10**9, "do_predict": "false", "mixed_precision": "bf16", "report_to": "none",
    "logging_steps": 50,
}
FINETUNE_SEEDS = (0, 1, 2)


def roberta(n=512):
    # --config resets train_mlm.py's model dict to RoBERTa fields; every value in it is overridden below.
    return {"model_type": "roberta", "n": n, "config": "configs/tiny_roberta.yaml",
            "model.max_position_embeddings": n + 2}  # RoBERTa numbers positions after pad id 1


def linformer(n=512, k=128, sharing="layerwise"):
    return {"model_type": "linformer", "n": n, "k": k, "sharing": sharing, "config": "configs/tiny.yaml",
            "model.max_seq_length": n,
            "model.projected_dim": k, "model.projection_sharing": sharing}


def run(name, arch, seed):
    return {"name": f"{name}_s{seed}", "seed": seed, **arch}


# In priority order: run_study.py with no --only runs them top to bottom.
RUNS = [
    run("roberta_n512", roberta(), 0),
    run("linformer_n512_k128_layerwise", linformer(k=128), 0),
    run("linformer_n512_k64_layerwise", linformer(k=64), 0),
    run("linformer_n512_k256_layerwise", linformer(k=256), 0),
    *[run(f"linformer_n512_k128_{s}", linformer(sharing=s), 0) for s in ("none", "headwise", "key_value")],
    *[run(f"linformer_n{n}_k128_layerwise", linformer(n=n), 0) for n in (1024, 2048)],
    *[run("roberta_n512", roberta(), s) for s in (1, 2)],
    *[run("linformer_n512_k128_layerwise", linformer(k=128), s) for s in (1, 2)],
]
assert len({r["name"] for r in RUNS}) == len(RUNS), "run names must be unique"
