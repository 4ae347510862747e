"""Shared pieces of the benchmarks.

- models of identical size: Linformer (ours), RoBERTa and ModernBERT (HF), built from random weights;
- analytic matmul FLOP counts of all three, per forward pass;
- interleaved timing (CUDA events on GPU, perf_counter on CPU), medians and spread;
- the machine's matmul peak, timed in the same loop as the models;
- peak activation memory: max_memory_allocated on CUDA, peak RSS of a fresh process on CPU;
- the paper's Table 3 (time saved / memory saved), for printing beside our numbers.

The scripts in this folder import it as `from common import ...` (run them as `python benchmarks/X.py`).
"""

import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")

# Wang et al. 2020, Table 3 (inference, Linformer with layerwise sharing vs Transformer, 16 GB V100).
PAPER_KS = (128, 256, 512, 1024, 2048)
_T = {
    512: (1.5, 1.3), 1024: (1.7, 1.6, 1.3), 2048: (2.6, 2.4, 2.1, 1.3), 4096: (3.4, 3.2, 2.8, 2.2, 1.3),
    8192: (5.5, 5.0, 4.4, 3.5, 2.1), 16384: (8.6, 7.8, 7.0, 5.6, 3.3), 32768: (13, 12, 11, 8.8, 5.0),
    65536: (20, 18, 16, 14, 7.9),
}
_M = {
    512: (1.7, 1.5), 1024: (3.0, 2.9, 1.8), 2048: (6.1, 5.6, 3.6, 2.0), 4096: (14, 13, 8.3, 4.3, 2.3),
    8192: (28, 26, 17, 8.5, 4.5), 16384: (56, 48, 32, 16, 8), 32768: (56, 48, 36, 18, 16),
    65536: (60, 52, 40, 20, 18),
}
PAPER_TIME = {n: dict(zip(PAPER_KS, v)) for n, v in _T.items()}
PAPER_MEMORY = {n: dict(zip(PAPER_KS, v)) for n, v in _M.items()}

BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
VOCAB = 50265
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# train_mlm.py's --mixed_precision spells them bf16 / fp16: both spellings are accepted, results say the long one.
DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


# ---------------------------------------------------------------- arguments

def int_list(text):
    """'512,1024' -> [512, 1024], with a clear error for anything else."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"expected a comma-separated list of integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"expected positive integers, got {text!r}")
    return values


def pick_device(name):
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu or cuda, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda asked for, but torch.cuda.is_available() is False")
    return torch.device(name)


def pick_dtype(name, device):
    name = DTYPE_ALIASES.get(name, name)
    if name not in DTYPES:
        raise ValueError(f"--dtype must be one of {', '.join(DTYPES)} (or {', '.join(DTYPE_ALIASES)}), got {name!r}")
    if name == "float16" and device.type == "cpu":
        raise ValueError("--dtype float16 is not supported on CPU; use float32 or bfloat16")
    return DTYPES[name]


def add_run_args(parser, repeats=3, tag_help=None):
    """The flags every timing script shares; setup_run() reads them."""
    parser.add_argument("--repeats", type=int, default=repeats, help="timed runs of each model (interleaved)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="float32", help="float32, bfloat16 or float16 (or fp32, bf16, fp16)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--tiny", action="store_true", help="2 layers, hidden 64 (smoke tests)")
    parser.add_argument("--out", default=RESULTS)
    parser.add_argument("--tag", default=None, help=tag_help)


def setup_run(args, parser):
    """Device, dtype, threads and model size from the flags every benchmark script shares."""
    try:
        device = pick_device(args.device)
        dtype = pick_dtype(args.dtype, device)
    except ValueError as e:
        parser.error(str(e))
    args.dtype = DTYPE_ALIASES.get(args.dtype, args.dtype)  # specs and results carry the DTYPES name
    if args.threads:
        torch.set_num_threads(args.threads)
    return device, dtype, (TINY if args.tiny else BASE)


def machine_info(device):
    info = dict(torch=torch.__version__, device=device.type, threads=torch.get_num_threads(),
                cpu_count=os.cpu_count())
    try:  # provenance: which commit, and the exact modeling file that was measured
        import hashlib

        root = os.path.dirname(HERE)
        info["git_head"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                                          text=True).stdout.strip()
        with open(os.path.join(root, "src", "linformer_hf", "modeling_linformer.py"), "rb") as f:
            info["modeling_sha1"] = hashlib.sha1(f.read()).hexdigest()[:12]
    except OSError:
        pass
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    else:
        try:
            with open("/proc/cpuinfo") as f:
                info["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
        except (OSError, StopIteration):
            pass
    return info


# ---------------------------------------------------------------- models

def build_roberta(n, dims=BASE, attn="sdpa", dtype=torch.float32, device="cpu", head=None, seed=0, chunk_ff=0):
    """RoBERTa of the given size that accepts n tokens (positions start after pad_token_id=1); `chunk_ff`:
    chunk_size_feed_forward (0: the feed-forward blocks run on the whole sequence at once)."""
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaModel

    if attn not in ("eager", "sdpa"):
        raise ValueError(f"attention must be eager or sdpa, got {attn!r}")
    config = RobertaConfig(vocab_size=VOCAB, max_position_embeddings=n + 2, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0, chunk_size_feed_forward=chunk_ff, **dims)
    return _instantiate(RobertaForMaskedLM if head == "mlm" else RobertaModel, config, attn, dtype, device, seed)


def _instantiate(model_class, config, attn, dtype, device, seed):
    """Same seed, attention backend and dtype for every model; no pooler on the bare encoders that have one
    (ModernBertModel has none). attn=None: the implementation transformers picks by default."""
    import inspect

    torch.manual_seed(seed)
    pooler = "add_pooling_layer" in inspect.signature(model_class.__init__).parameters
    extra = {"add_pooling_layer": False} if pooler else {}
    model = model_class._from_config(config, attn_implementation=attn, dtype=dtype, **extra)
    return model.to(device).eval()


def build_modernbert(n, dims=BASE, attn=None, dtype=torch.float32, device="cpu", head=None, seed=0):
    """ModernBERT with the depth, width, heads and intermediate_size of the others, accepting n tokens.

    Everything else is ModernBertConfig's default, because that is the architecture users pick: RoPE, local
    attention (window local_attention=128) on two layers of three and global attention on every third
    (global_attn_every_n_layers=3), and a GLU MLP whose input map is hidden x 2*intermediate_size (gate and
    value halves of intermediate_size each), so its MLP does 1.5x RoBERTa's MLP FLOPs at equal
    intermediate_size. The special ids are RoBERTa's, so they fit the shared VOCAB (ModernBERT's own
    pad id 50283 would not). attn=None: transformers' default kernel, recorded by the caller."""
    from transformers import ModernBertConfig, ModernBertForMaskedLM, ModernBertModel

    config = ModernBertConfig(vocab_size=VOCAB, max_position_embeddings=n, pad_token_id=1, bos_token_id=0,
                              cls_token_id=0, eos_token_id=2, sep_token_id=2, embedding_dropout=0.0,
                              attention_dropout=0.0, mlp_dropout=0.0, **dims)
    return _instantiate(ModernBertForMaskedLM if head == "mlm" else ModernBertModel, config, attn, dtype, device, seed)


def modernbert_default_attention():
    """The attention implementation transformers gives ModernBERT when none is asked for (in transformers 5:
    sdpa on CPU and CUDA alike, flash only on request). Resolved once, then asked for by name, so that
    the results say which kernel ran."""
    tiny = dict(TINY, num_hidden_layers=1)
    return build_modernbert(16, tiny).config._attn_implementation


def baseline_models(text):
    """--baselines 'eager,sdpa,modernbert' -> [(label, model name)]: eager and sdpa are RoBERTa's attention
    kernels, modernbert is ModernBERT with transformers' default attention (e.g. ("modernbert", "modernbert-sdpa"))."""
    out = []
    for b in (b.strip() for b in text.split(",")):
        if b in ("eager", "sdpa"):
            out.append((b, f"roberta-{b}"))
        elif b == "modernbert":
            out.append((b, f"modernbert-{modernbert_default_attention()}"))
        elif b:
            raise ValueError(f"--baselines: each must be eager or sdpa (RoBERTa's attention) or modernbert, got {text!r}")
    if not out:
        raise ValueError("--baselines: give at least one of eager, sdpa, modernbert")
    return out


def build_linformer(n, k, dims=BASE, attn="sdpa", dtype=torch.float32, device="cpu", head=None,
                    sharing="layerwise", projection="linear", seed=0, chunk_ff=0):
    """Our Linformer of the given size, n = max_seq_length, k = projected_dim."""
    from linformer_hf import LinformerConfig, LinformerForMaskedLM, LinformerModel

    config = LinformerConfig(vocab_size=VOCAB, max_seq_length=n, projected_dim=k, projection_sharing=sharing,
                             projection_type=projection, hidden_dropout_prob=0.0,
                             attention_probs_dropout_prob=0.0, chunk_size_feed_forward=chunk_ff, **dims)
    return _instantiate(LinformerForMaskedLM if head == "mlm" else LinformerModel, config, attn, dtype, device, seed)


def random_ids(batch, n, device="cpu", seed=0, vocab=VOCAB):
    """Token ids that avoid the special ids 0-3 (so no padding), the same for every model."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, vocab, (batch, n), generator=g).to(device)


def build(spec, device="cpu"):
    """Model of a spec dict: model in {roberta-eager, roberta-sdpa, linformer-eager, linformer-sdpa,
    modernbert-<attn>, modernbert (transformers' default attention)}, n, k (Linformer), dims, dtype,
    head (None or "mlm"), sharing (Linformer), chunk_ff (RoBERTa and Linformer)."""
    kind, _, attn = spec["model"].partition("-")
    dims, dtype = spec.get("dims", BASE), DTYPES[spec.get("dtype", "float32")]
    chunk_ff = spec.get("chunk_ff", 0)
    if kind == "modernbert":
        if chunk_ff:  # its MLP ignores chunk_size_feed_forward: refuse rather than measure something else
            raise ValueError("chunk_ff: ModernBERT has no chunked feed-forward")
        return build_modernbert(spec["n"], dims, attn or None, dtype, device, head=spec.get("head"))
    if kind == "roberta":
        return build_roberta(spec["n"], dims, attn, dtype, device, head=spec.get("head"), chunk_ff=chunk_ff)
    if kind == "linformer":
        return build_linformer(spec["n"], spec["k"], dims, attn, dtype, device, head=spec.get("head"),
                               sharing=spec.get("sharing", "layerwise"), chunk_ff=chunk_ff)
    raise ValueError(f"unknown model {spec['model']!r}: roberta-eager, roberta-sdpa, linformer-eager, linformer-sdpa, "
                     "modernbert[-<attn>]")


def inference_step(model, ids):
    """One forward pass under inference_mode."""
    def step():
        with torch.inference_mode():
            return model(input_ids=ids)
    return step


def training_step(model, ids, lr=1e-4, mask_prob=0.15, seed=0, amp=None, max_grad_norm=1.0):
    """One masked-LM update as train_mlm.py takes it: forward, backward, gradient clipping at its default
    --max_grad_norm 1.0, AdamW; the model needs an MLM head.

    amp ("bfloat16" / "float16", model in float32): the forward runs under autocast with fp32 master
    weights, which is what train_mlm.py's --mixed_precision does through Accelerate; float16 adds
    Accelerate's GradScaler (bfloat16 needs none)."""
    model.train()
    g = torch.Generator().manual_seed(seed)
    labels = torch.where(torch.rand(ids.shape, generator=g).to(ids.device) < mask_prob, ids, -100)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    if amp is not None and next(model.parameters()).dtype != torch.float32:
        raise ValueError("amp: autocast needs the fp32 master weights; build the model in float32")
    device_type = ids.device.type
    autocast = (lambda: torch.autocast(device_type, dtype=DTYPES[amp])) if amp else contextlib.nullcontext
    scaler = torch.amp.GradScaler(device_type) if amp == "float16" else None

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = model(input_ids=ids, labels=labels).loss
        if scaler is None:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            scaler.step(opt)
            scaler.update()
        return loss
    return step


# ---------------------------------------------------------------- FLOPs (matmuls only: 2*m*n*k each)

def flops_roberta(n, dims=BASE, batch=1):
    D, L, I = dims["hidden_size"], dims["num_hidden_layers"], dims["intermediate_size"]
    per_layer = 2 * n * D * D * 4 + 2 * n * n * D * 2 + 2 * n * D * I * 2  # QKV+out, QK^T+PV, FFN
    return batch * L * per_layer


def flops_linformer(n, k, dims=BASE, batch=1, sharing="layerwise", projection="linear"):
    """Matmul FLOPs of our LinformerModel forward on n tokens (no padding mask), projected length k.

    Mirrors modeling_linformer.py: per layer the query and output maps (n x D x D each), the FFN, and
    Q (EK)^T, P (FV) (n x k x D each). Keys/values: a learned E shared by all heads is applied to the
    layer input first (E X: k x n x D, once if E = F) followed by the key/value maps on k rows
    (k x D x D each), plus E 1 (k x n, for the bias), whenever that is cheaper than mapping the n rows
    first (n x D x D each) and projecting after (k x n x D each) - the model picks the cheaper order.
    Pooling projections do no matmul; "conv" kernels are counted as their matmul.
    """
    D, L, I, H = dims["hidden_size"], dims["num_hidden_layers"], dims["intermediate_size"], dims["num_attention_heads"]
    per_layer = 2 * n * D * D * 2 + 2 * n * D * I * 2 + 2 * n * k * D * 2
    shared_kv = sharing in ("key_value", "layerwise")
    groups = H if sharing == "none" else 1
    if projection == "linear":
        n_proj = 1 if shared_kv else 2
        first = n_proj * groups * k * n * D + 2 * k * D * D   # the model's cost model (multiply-adds)
        after = 2 * n * D * D + 2 * k * n * D
        if first < after:
            per_layer += 2 * (n_proj * groups * k * n * D + 2 * k * D * D)  # E X, K/V maps on k rows
            once = 2 * n_proj * groups * k * n                                  # E 1 (bias), whole batch
        else:
            per_layer += 2 * (2 * n * D * D + 2 * k * n * D)
            once = 0
    else:
        # pooling: K/V maps on n rows (no matmul in the pooling itself); conv: kernel as a matmul
        per_layer += 2 * 2 * n * D * D + (2 * 2 * n * D if projection == "conv" else 0)
        once = 0
    return L * (batch * per_layer + once)


def flops_modernbert(n, dims=BASE, batch=1, attn="sdpa"):
    """Matmul FLOPs of ModernBertModel's forward on n tokens, or None where we cannot count them.

    Per layer: Wqkv (n x D x 3D), Wo (n x D x D), the GLU MLP (Wi: n x D x 2I, Wo: n x I x D) and
    Q K^T, P V. With eager and sdpa attention the local window of 2 layers in 3 is a mask over the full
    n x n scores: nothing outside the window is skipped (sdpa with that mask is even a little slower than
    without), so the executed count is full attention on every layer. Kernels that do skip outside the
    window (flash attention, flex) do a count we do not model: None, reported as n/a."""
    if attn not in ("eager", "sdpa"):
        return None
    D, L, I = dims["hidden_size"], dims["num_hidden_layers"], dims["intermediate_size"]
    per_layer = 2 * n * D * (3 * D + D) + 2 * n * n * D * 2 + 2 * n * D * (2 * I + I)
    return batch * L * per_layer


def forward_flops(model, n, k=None, dims=BASE, batch=1, sharing="layerwise"):
    """The forward matmul FLOPs of a model name as `build` takes it (None: not counted)."""
    kind, _, attn = model.partition("-")
    if kind == "roberta":
        return flops_roberta(n, dims, batch)
    if kind == "modernbert":
        return flops_modernbert(n, dims, batch, attn)
    return flops_linformer(n, k, dims, batch, sharing)


def count_matmul_flops(fn, model=None):
    """FLOPs of the matmuls that fn() executes, counted by torch (a check on the analytic counts).
    Pass the model when parameters are forward arguments (Linformer's shared E): the counter's module
    hooks cannot track tensors that require grad under inference_mode, so grads are off meanwhile."""
    from torch.utils.flop_counter import FlopCounterMode

    params = [p for p in model.parameters() if p.requires_grad] if model is not None else []
    for p in params:
        p.requires_grad_(False)
    try:
        with FlopCounterMode(display=False) as counter:
            fn()
    finally:
        for p in params:
            p.requires_grad_(True)
    return counter.get_total_flops()


# ---------------------------------------------------------------- timing

def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_once(fn, device):
    """Seconds for one call of fn, CUDA events on GPU, perf_counter on CPU."""
    if torch.device(device).type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def time_interleaved(fns, device, warmup=1, repeats=5, progress=None, probe=None):
    """Time every fn of the dict `fns` `repeats` times, interleaved: round r runs all of them once, in an
    order rotated by r, so that a slow stretch of a shared machine hits every candidate alike.
    Returns {name: [seconds, ...]}. With `probe` (a short matmul), it is also timed right before and
    right after every timed call, as "<name>@probe": the machine's speed at the moment each candidate ran."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
            if progress is not None:
                progress.update(1)
    sync(device)
    times = {name: [] for name in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            before = time_once(probe, device) if probe is not None else None
            times[name].append(time_once(fns[name], device))
            if probe is not None:
                times.setdefault(name + "@probe", []).extend([before, time_once(probe, device)])
            if progress is not None:
                progress.update(1)
    return times


def stats(samples):
    """Median and spread (min, max, interquartile range) of a list of seconds."""
    s = sorted(samples)
    q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0]] * 3
    return dict(median=statistics.median(s), min=s[0], max=s[-1], q1=q[0], q3=q[2], n=len(s))


def matmul_peak(device, dtype, size=2048):
    """A square matmul in the benchmark's dtype: (fn, flops). Timed right before and after every model
    run (see time_interleaved), its FLOP/s is the machine's matmul peak at that moment, which the
    model's achieved FLOP/s is compared to. 2048^3 runs at the same FLOP/s as 4096^3 and the model's own
    GEMMs here, and is short enough (~0.2 s on one core) to be taken often."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=g).to(device=device, dtype=dtype)
    return (lambda: torch.mm(a, b)), 2 * size ** 3


# ---------------------------------------------------------------- memory

def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


def peak_memory(fn, device):
    """Peak memory (bytes) that fn() adds on top of what is resident before it.

    CUDA: max_memory_allocated - memory_allocated. CPU (Linux): the process's peak resident set
    (VmHWM, reset through /proc/self/clear_refs) minus its resident set before the call. Run the CPU
    variant in a fresh process (see `probe_memory`): memory freed earlier in a long-lived process
    can be reused without raising the resident set, which would under-count."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated(device) - base
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current VmRSS (Linux >= 4.0)
    except OSError as e:
        raise RuntimeError("CPU peak memory needs Linux's /proc/self/clear_refs (writable)") from e
    base = _status_kb("VmRSS")
    fn()
    return (_status_kb("VmHWM") - base) * 1024


def probe_memory(spec, timeout=3600):
    """Run memory_probe.py on `spec` (a dict) in a fresh Python process; returns its JSON answer."""
    env = dict(os.environ)
    # Fixed mmap threshold: large tensors are mmap'd and go back to the OS when freed, so the
    # resident set follows the live tensors (glibc's dynamic threshold would keep freed blocks).
    env.setdefault("MALLOC_MMAP_THRESHOLD_", "131072")
    cmd = [sys.executable, os.path.join(HERE, "memory_probe.py"), json.dumps(spec)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"memory probe failed for {spec}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def estimate_activation_bytes(model, n, k=None, dims=BASE, batch=1, bytes_per=4, training=False):
    """Rough peak activation bytes of one forward (training: all layers kept), to skip what cannot fit."""
    D, L, I, H = dims["hidden_size"], dims["num_hidden_layers"], dims["intermediate_size"], dims["num_attention_heads"]
    linear = batch * n * (2 * I + 8 * D)
    once = 0
    if model == "roberta-eager":
        quad = 3 * batch * H * n * n
    elif model == "roberta-sdpa":
        quad = 0 if not training else batch * H * n * 2
    elif model.startswith("modernbert"):
        # GLU: 2I wide after Wi, then I; the local window is an n x n mask (bool for sdpa, kept for the
        # whole forward, which sdpa turns into a float mask per layer; additive float for eager)
        linear = batch * n * (4 * I + 8 * D)
        quad = (3 * batch * H * n * n if model.endswith("eager") else 0) + batch * n * n
        once = n * n
    else:
        quad = 3 * batch * H * n * k
    per_layer = (linear + quad) * bytes_per
    return per_layer * (L if training else 1) + once


def available_bytes():
    try:
        import psutil
        return psutil.virtual_memory().available
    except ImportError:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


# ---------------------------------------------------------------- output

def save_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, default=str)


def save_csv(path, rows):
    import csv

    os.makedirs(os.path.dirname(path), exist_ok=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def fmt_ratio(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.1f}x" if x < 10 else f"{x:.0f}x"


def fmt_bytes(b):
    return f"{b / 2**20:.0f} MiB" if b < 2**30 else f"{b / 2**30:.2f} GiB"
