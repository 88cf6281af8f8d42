"""Encoder backends side by side in one run: torch (float32), torch-bf16, onnx and onnx-int8 (any of
BACKENDS with --backends), for each model given, on each device given (--devices cpu cuda: CPU beside GPU).

For each (model, backend), in a fresh subprocess (so peak memory is its own):
1. encoder load time from the model folder (with the ONNX export when the backend needs one);
2. index build on the MEDIC names (names/s);
3. spacy.load time of the saved pipeline;
4. linking the NCBI-disease test documents with their gold mentions as doc.ents: nlp.pipe with a cold
   vector cache, again with the warm cache (the median of --repeats passes each), and the naive loop (one
   mention at a time, no cache);
5. peak resident memory;
6. with --accuracy: acc@1 on NCBI-disease dev (strict and biosyn protocols, through the component).
Then the cosine between each variant's MEDIC name vectors and those of the model's first variant (the
first device with the first backend): min and mean.
With --scispacy-python PYTHON (a virtual environment with scispacy, which needs numpy<2), scispacy's
EntityLinker on the same MEDIC names and documents: index build, linking mentions/s, peak RSS, and
acc@1 on NCBI-disease dev (strict) of its ranked candidates, scored by this project's evaluation code
(benchmarks/scispacy_child.py runs in that environment).

Usage: python benchmarks/bench_backends.py [--model all-MiniLM-L6-v2:mean] [--model FOLDER:cls ...]
       [--backends torch torch-bf16 onnx onnx-int8] [--devices cpu cuda] [--accuracy] [--limit-names N]
       [--limit-docs N] [--threads N] [--repeats N]
       [--scispacy-python PYTHON]
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def run_variant(args) -> None:
    """The child: measure one (model, backend) and write a JSON report and the name vectors."""
    import spacy
    import torch

    from spacy_sapbert.encoder import Encoder
    from spacy_sapbert.readers import read_vocabulary
    from spacy_sapbert.readers.corpora import documents_to_docs, read_pubtator
    from spacy_sapbert.vector_cache import VectorCache

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    medic = list(read_vocabulary(args.data / "medic" / "medic_06Jul2012.txt", "medic"))[: args.limit_names or None]
    config = {"model": args.model, "pooling": args.pooling, "device": args.device, "backend": args.backend}
    _, encoder_seconds = timed(lambda: Encoder(args.model, pooling=args.pooling, device=args.device, backend=args.backend))

    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config=config)
    linker.initialize(vocabulary=medic[:10])  # loads the encoder (and exports the ONNX model)
    _, build_seconds = timed(lambda: linker.build_index(medic))
    names = len(linker.index.names)
    numpy.save(out.with_suffix(".npy"), linker.index.vectors.reconstruct_n(0, linker.index.vectors.ntotal))

    with tempfile.TemporaryDirectory() as tmp:
        nlp.to_disk(Path(tmp) / "pipeline")
        nlp, load_seconds = timed(lambda: spacy.load(Path(tmp) / "pipeline"))
    linker = nlp.get_pipe("sapbert_linker")
    documents = list(read_pubtator(args.data / "ncbi-disease" / "NCBItestset_corpus.txt"))[: args.limit_docs or None]
    mentions = sum(len(doc.ents) for doc in documents_to_docs(nlp, documents))

    def link_all() -> float:
        return timed(lambda: list(nlp.pipe(documents_to_docs(nlp, documents), batch_size=128)))[1]

    def cold_pass() -> float:
        linker.vector_cache.clear()
        return link_all()

    # each pass takes well under a second: the median of --repeats passes, not one pass's hiccups
    cold = statistics.median(cold_pass() for _ in range(args.repeats))
    warm = statistics.median(link_all() for _ in range(args.repeats))
    linker.vector_cache = VectorCache(0)

    def naive() -> None:
        for doc in documents_to_docs(nlp, documents):
            for ent in doc.ents:
                linker.search_texts([ent.text])

    _, naive_seconds = timed(naive)
    report = {
        "model": args.model, "device": args.device, "backend": args.backend, "names": names, "mentions": mentions,
        "encoder_load_s": encoder_seconds, "build_s": build_seconds, "pipeline_load_s": load_seconds,
        "cold_s": cold, "warm_s": warm, "naive_s": naive_seconds,
    }
    if args.accuracy:
        from spacy_sapbert.evaluation import Preprocessing, run_benchmark
        from spacy_sapbert.readers import read_spell_check, vocabulary_specs

        ncbi = args.data / "ncbi-disease"
        accuracy = run_benchmark(
            ncbi / "NCBIdevelopset_corpus.txt", vocabulary_specs([args.data / "medic" / "medic_06Jul2012.txt"], "auto", []),
            model=args.model, pooling=args.pooling, device=args.device, backend=args.backend, train=[ncbi / "NCBItrainset_corpus.txt"],
            prep=Preprocessing(spell_check=read_spell_check(args.data / "medic" / "ncbi-spell-check.txt")),
            cache_dir=Path(tempfile.mkdtemp(prefix="bench-backends-")),
        )
        [by_protocol] = accuracy["results"].values()  # one system: the model on this backend
        report["acc1"] = {protocol: metrics["acc@1"] for protocol, metrics in by_protocol.items()}
    report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.write_text(json.dumps(report, indent=2), encoding="utf8")


def run_scispacy(python: str, data: Path, limit_names: int, limit_docs: int) -> dict:
    """scispacy's EntityLinker in its own environment on this benchmark's inputs, scored here."""
    import spacy

    from spacy_sapbert.evaluation import Preprocessing, mentions_from_documents, score_retriever
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.readers import read_vocabulary
    from spacy_sapbert.readers.corpora import documents_to_docs, read_pubtator

    kb = KnowledgeBase(list(read_vocabulary(data / "medic" / "medic_06Jul2012.txt", "medic"))[: limit_names or None])
    documents = list(read_pubtator(data / "ncbi-disease" / "NCBItestset_corpus.txt"))[: limit_docs or None]
    docs = documents_to_docs(spacy.blank("en"), documents)  # the same placed gold ents as the encoder rows
    dev, _ = mentions_from_documents(read_pubtator(data / "ncbi-disease" / "NCBIdevelopset_corpus.txt"), Preprocessing())
    payload = {
        "kb": [{"concept_id": c.id, "canonical_name": c.name, "aliases": c.synonyms} for c in kb],
        "docs": [{"text": d.text, "ents": [[e.start_char, e.end_char, e.label_] for e in d.ents]} for d in docs],
        "queries": sorted({q for m in dev for q in m.queries}),
    }
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "in.json").write_text(json.dumps(payload), encoding="utf8")
        child = Path(__file__).with_name("scispacy_child.py")
        subprocess.run([python, str(child), str(Path(tmp) / "in.json"), str(Path(tmp) / "out.json")], check=True)
        report = json.loads((Path(tmp) / "out.json").read_text(encoding="utf8"))

    class Ranked:
        def __init__(self, floor: float):
            self.floor = floor

        def rank(self, texts, k):
            return [[(cid, score) for cid, score in report["ranked"][t] if score > self.floor][:k] for t in texts]

    report["acc1_ranked"] = score_retriever(Ranked(float("-inf")), dev, kb)[0]["acc@1"]
    report["acc1_threshold"] = score_retriever(Ranked(0.7), dev, kb)[0]["acc@1"]  # the linker's default floor
    del report["ranked"]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--model", action="append", default=[], help="MODEL:POOLING (default all-MiniLM-L6-v2:mean)")
    parser.add_argument("--backends", nargs="*", default=["torch", "torch-bf16", "onnx", "onnx-int8"], help="none: only scispacy")
    parser.add_argument("--devices", nargs="+", default=["cpu"], help="torch devices, each with every backend")
    parser.add_argument("--accuracy", action="store_true", help="also acc@1 on NCBI-disease dev (encodes MEDIC again)")
    parser.add_argument("--limit-names", type=int, default=0, help="only the first N MEDIC concepts (a quick check)")
    parser.add_argument("--limit-docs", type=int, default=0, help="only the first N NCBI-disease test documents")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3, help="linking passes, cold and warm each: the median is reported")
    parser.add_argument("--scispacy-python", help="Python of a virtual environment with scispacy: add its EntityLinker")
    parser.add_argument("--child", nargs=4, metavar=("MODEL", "POOLING", "BACKEND", "DEVICE"), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    import torch

    args.threads = args.threads or torch.get_num_threads()
    if args.child:
        args.model, args.pooling, args.backend, args.device = args.child
        run_variant(args)
        return

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.model or ["all-MiniLM-L6-v2:mean"]:
            model, pooling = spec.rsplit(":", 1)
            first = None
            for device, backend in [(d, b) for d in args.devices for b in args.backends]:
                out = Path(tmp) / f"{len(rows)}.json"
                command = [sys.executable, __file__, "--child", model, pooling, backend, device, "--out", str(out), "--data", str(args.data),
                           "--limit-names", str(args.limit_names), "--limit-docs", str(args.limit_docs), "--threads", str(args.threads),
                           "--repeats", str(args.repeats)]
                subprocess.run(command + (["--accuracy"] if args.accuracy else []), check=True)
                row = json.loads(out.read_text(encoding="utf8"))
                vectors = numpy.load(out.with_suffix(".npy"))
                if first is None:
                    first = vectors
                else:
                    a, b = vectors, first
                    cos = (a * b).sum(1) / numpy.linalg.norm(a, axis=1) / numpy.linalg.norm(b, axis=1)
                    row["cos_min"], row["cos_mean"] = float(cos.min()), float(cos.mean())
                rows.append(row)
    scispacy = run_scispacy(args.scispacy_python, args.data, args.limit_names, args.limit_docs) if args.scispacy_python else None

    gpu = f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {args.threads} torch threads, native bfloat16 matmul: "
          f"{torch.ops.mkldnn._is_mkldnn_bf16_supported()}{gpu}; NCBI-disease test gold mentions; MEDIC names")
    print("| model | device | backend | encoder load s | index build names/s | pipeline load s | nlp.pipe cold mentions/s | warm | naive loop | peak RSS MB | cosine to the first min / mean | acc@1 dev strict / biosyn |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cos = f"{r['cos_min']:.5f} / {r['cos_mean']:.6f}" if "cos_min" in r else "-"
        acc = f"{100 * r['acc1'].get('strict', float('nan')):.1f} / {100 * r['acc1'].get('biosyn', float('nan')):.1f}" if "acc1" in r else "-"
        print(f"| {Path(r['model']).name} | {r['device']} | {r['backend']} | {r['encoder_load_s']:.1f} | {r['names'] / r['build_s']:.0f} | "
              f"{r['pipeline_load_s']:.1f} | {r['mentions'] / r['cold_s']:.0f} | {r['mentions'] / r['warm_s']:.0f} | "
              f"{r['mentions'] / r['naive_s']:.0f} | {r['peak_rss_mb']:.0f} | {cos} | {acc} |")

    if scispacy:
        print(f"\nscispacy {scispacy['versions']['scispacy']} EntityLinker (TF-IDF char 3-grams, nmslib HNSW; spaCy "
              f"{scispacy['versions']['spacy']}), same names and documents:")
        print("| index build names/s | linking mentions/s | peak RSS MB | acc@1 dev strict, ranked / with its 0.7 threshold |")
        print("|---|---|---|---|")
        print(f"| {scispacy['names'] / scispacy['build_s']:.0f} | {scispacy['mentions'] / scispacy['pipe_s']:.0f} | "
              f"{scispacy['peak_rss_mb']:.0f} | {100 * scispacy['acc1_ranked']:.1f} / {100 * scispacy['acc1_threshold']:.1f} |")


if __name__ == "__main__":
    main()
