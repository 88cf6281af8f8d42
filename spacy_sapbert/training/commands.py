"""Command-line commands of training: ``extract``, ``pairs``, ``train`` (SAP) and ``train-dhns`` (kNN-BioEL).

``register(app)`` adds them to a typer app (the package's CLI calls it)::

    python -m spacy_sapbert extract --mrconso MRCONSO.RRF --mrrel MRREL.RRF -o synonyms.txt
    python -m spacy_sapbert pairs synonyms.txt pairs.txt --max-pairs 50 --seed 0
    python -m spacy_sapbert train pairs.txt --model BASE_MODEL --output runs/sap
    torchrun --nproc_per_node 4 -m spacy_sapbert train pairs.txt --model BASE_MODEL --output runs/sap
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..errors import SapbertError

__all__ = ["extract_command", "pairs_command", "register", "train_command", "train_dhns_command"]


def _split(value: Optional[str]) -> Optional[List[str]]:
    """A comma-separated option as a list; None (or "all") for no restriction."""
    if value is None or value.strip().lower() in ("", "all"):
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def _claim_run_output(output: Path, resume: bool, overwrite: bool) -> None:
    """Refuse an output folder that is not a run of ours; with --overwrite (and no --resume) clear the earlier run."""
    import os

    from ..outputs import check_run_output, clear_run

    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun, rank 0 alone looks at the folder
        return
    check_run_output(output, resume, overwrite)
    if overwrite and not resume:
        clear_run(output)


def extract_command(
    vocabulary: Optional[List[Path]] = typer.Argument(None, help="Vocabulary file(s): id||name dictionary, MEDIC, .obo, OBO-graph .json, MeSH .tsv. Not with --mrconso."),
    output: Path = typer.Option(..., "--output", "-o", help="Synonyms file to write, one 'ID||name|name|...' line per concept."),
    format: str = typer.Option("auto", help="Format of the vocabulary files: dictionary, medic, obo, obo-json, mesh, mesh-supp or auto."),
    mrconso: Optional[Path] = typer.Option(None, help="UMLS MRCONSO.RRF to read instead of vocabulary files (streamed)."),
    mrsty: Optional[Path] = typer.Option(None, help="UMLS MRSTY.RRF (semantic types), needed by --semantic-types."),
    mrrel: Optional[Path] = typer.Option(None, help="UMLS MRREL.RRF: the names of a drug and its trade names are added to each other."),
    languages: str = typer.Option("ENG", help="UMLS languages (LAT), comma-separated; 'all' for every language."),
    sources: Optional[str] = typer.Option(None, help="UMLS sources (SAB) to keep, comma-separated; default all."),
    exclude_sources: Optional[str] = typer.Option(None, help="UMLS sources (SAB) to leave out, comma-separated."),
    semantic_types: Optional[str] = typer.Option(None, help="Keep only UMLS concepts with one of these TUIs, comma-separated (needs --mrsty)."),
    mesh_trees: List[str] = typer.Option([], help="Keep only MeSH descriptors under these tree letters (e.g. C diseases, D chemicals)."),
    lowercase: bool = typer.Option(True, help="Lowercase the names (SapBERT does)."),
    strict: bool = typer.Option(True, help="Fail on a malformed line (--no-strict skips and counts them)."),
) -> None:
    """Write the synonym sets of a vocabulary or of UMLS: names lowercased and deduplicated per concept.

    UMLS is streamed (a full MRCONSO extracts in well under 4 GB of memory). Several vocabulary files
    are merged by concept id.
    """
    from .extract import extract_synonyms, umls_concepts, write_synonyms

    if mrconso is not None:
        if vocabulary:
            raise SapbertError("give either vocabulary files or --mrconso, not both")
        concepts = umls_concepts(
            mrconso,
            mrsty=mrsty,
            mrrel=mrrel,
            languages=_split(languages),
            sources=_split(sources),
            exclude_sources=_split(exclude_sources) or (),
            semantic_types=_split(semantic_types),
            strict=strict,
        )
    else:
        if not vocabulary:
            raise SapbertError("give vocabulary files or --mrconso")
        if mrsty or mrrel or semantic_types:
            raise SapbertError("--mrsty, --mrrel and --semantic-types go with --mrconso")
        from ..readers import read_vocabularies, vocabulary_specs

        concepts = read_vocabularies(vocabulary_specs(vocabulary, format, mesh_trees), strict=strict)
    count = write_synonyms(output, extract_synonyms(concepts, lowercase=lowercase))
    typer.echo(f"{count} concepts written to {output}", err=True)


def pairs_command(
    files: List[Path] = typer.Argument(..., metavar="[SYNONYMS] OUTPUT", help="Synonyms file (from `extract`) and the pairs file to write; with --corpus only OUTPUT."),
    max_pairs: int = typer.Option(50, help="At most this many pairs per concept (a seeded random sample); 0 for all."),
    seed: int = typer.Option(0, help="Seed of the per-concept sampling."),
    corpus: Optional[Path] = typer.Option(None, help="PubTator training corpus: write fine-tuning pairs (mention, name of its gold concept) instead."),
    vocab: Optional[Path] = typer.Option(None, help="Vocabulary of the corpus's gold ids (with --corpus)."),
    vocab_format: str = typer.Option("auto", help="Format of --vocab."),
    labels: Optional[str] = typer.Option(None, help="Only mentions of these types, comma-separated (with --corpus)."),
    composites: str = typer.Option("parts", help="Composite 'A|B' golds: 'parts' uses the corpus's listed part texts (else skipped), 'skip' skips them."),
    lowercase: bool = typer.Option(True, help="Lowercase mentions and names (with --corpus)."),
    strict: bool = typer.Option(True, help="Fail on a malformed line (--no-strict skips and counts them)."),
) -> None:
    """Write the positive pairs file ('ID||name1||name2' lines) for `train`.

    From a synonyms file: every pair of distinct names of a concept, at most --max-pairs per concept.
    With --corpus and --vocab: each training mention with every name of its gold concept (fine-tuning).
    """
    from .extract import read_synonyms
    from .pairs import finetune_pairs, save_pairs, write_pairs

    if corpus is not None:
        if len(files) != 1:
            raise SapbertError("with --corpus give only the OUTPUT pairs file")
        if vocab is None:
            raise SapbertError("--corpus needs --vocab (the vocabulary of its gold ids)")
        from ..kb import KnowledgeBase
        from ..readers import read_vocabulary
        from ..readers.corpora import read_pubtator

        kb = KnowledgeBase(read_vocabulary(str(vocab), vocab_format, strict=strict))
        stats: dict = {}
        pairs = finetune_pairs(
            read_pubtator(corpus, strict=strict), kb, labels=_split(labels), composites=composites,
            lowercase=lowercase, stats=stats,
        )
        count = save_pairs(files[0], pairs)
        typer.echo(
            f"{count} pairs from {stats['used']} of {stats['mentions']} mentions written to {files[0]} "
            f"(skipped: {stats['cuiless']} without concept, {stats['combination']} combinations, "
            f"{stats['composite_skipped']} composites, {stats['unknown_id']} ids not in the vocabulary)",
            err=True,
        )
        return
    if len(files) != 2:
        raise SapbertError("give the SYNONYMS file and the OUTPUT pairs file (or --corpus, --vocab and OUTPUT)")
    count = write_pairs(files[1], read_synonyms(files[0], strict=strict), max_pairs=max_pairs or None, seed=seed)
    typer.echo(f"{count} pairs written to {files[-1]}", err=True)


def train_command(
    pairs: Path = typer.Argument(..., help="Pairs file ('ID||name1||name2' lines, from `pairs`)."),
    model: str = typer.Option(..., help="Base encoder: local Hugging Face folder or hub name."),
    output: Path = typer.Option(..., help="Output folder: model/, checkpoints/last/, train_log.jsonl, loss.png."),
    batch_size: int = typer.Option(256, help="Pairs per micro-batch and process."),
    lr: float = typer.Option(2e-5, help="AdamW learning rate."),
    weight_decay: float = typer.Option(0.01, help="AdamW weight decay."),
    epochs: int = typer.Option(1, help="Passes over the pairs."),
    max_steps: Optional[int] = typer.Option(None, help="Stop after this many optimizer steps (default: end of the epochs)."),
    grad_accum: int = typer.Option(1, help="Micro-batches per optimizer step."),
    max_length: int = typer.Option(25, help="Word pieces per name."),
    pooling: Optional[str] = typer.Option(None, help="cls (SapBERT) or mean. Default: what the model folder declares (sentence-transformers' 1_Pooling), else cls."),
    alpha: float = typer.Option(2.0, help="Multi-similarity loss alpha (positive pairs)."),
    beta: float = typer.Option(50.0, help="Multi-similarity loss beta (negative pairs)."),
    base: float = typer.Option(0.5, help="Multi-similarity loss base."),
    margin: float = typer.Option(0.2, help="Triplet miner margin."),
    miner_distance: str = typer.Option("euclidean", help="Miner distance: euclidean (on unit vectors, as SapBERT) or cosine."),
    use_miner: bool = typer.Option(True, help="Mine hard triplets (--no-use-miner: the loss sees all pairs)."),
    warmup_steps: int = typer.Option(0, help="Linear learning-rate warm-up steps, then constant."),
    encode_chunk: int = typer.Option(64, help="Names per forward pass, sorted by length to cut padding."),
    seed: int = typer.Option(42, help="Seed of the data order and of dropout."),
    checkpoint_every: int = typer.Option(1000, help="Write output/checkpoints/last every N steps."),
    log_every: int = typer.Option(10, help="Append to train_log.jsonl every N steps."),
    device: str = typer.Option("auto", help="auto (CUDA when present), cpu or cuda."),
    amp: bool = typer.Option(True, help="Mixed precision (CUDA only)."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
    resume: bool = typer.Option(False, help="Continue from output/checkpoints/last."),
    overwrite: bool = typer.Option(False, help="Start again in OUTPUT when it holds an earlier run (its files are replaced)."),
) -> None:
    """Self-alignment pretraining (SapBERT) of an encoder on a pairs file; writes output/model/.

    Run under torchrun for several processes: torchrun --nproc_per_node N -m spacy_sapbert train ...
    """
    import os

    from ..encoder import default_pooling
    from .trainer import TrainConfig, train

    config = TrainConfig(
        model=model, output=str(output), pairs=str(pairs), batch_size=batch_size, lr=lr, weight_decay=weight_decay,
        epochs=epochs, max_steps=max_steps, grad_accum=grad_accum, max_length=max_length, pooling=pooling or default_pooling(model),
        alpha=alpha, beta=beta, base=base, margin=margin, miner_distance=miner_distance, use_miner=use_miner,
        warmup_steps=warmup_steps, encode_chunk=encode_chunk, seed=seed, checkpoint_every=checkpoint_every, log_every=log_every,
        device=device, amp=amp, progress=progress,
    )
    _claim_run_output(output, resume, overwrite)
    model_dir = train(config, resume=resume)
    if int(os.environ.get("RANK", "0")) == 0:
        typer.echo(f"model written to {model_dir}", err=True)


def train_dhns_command(
    corpora: List[Path] = typer.Argument(..., help="Annotated PubTator training corpora (e.g. NCBItrainset_corpus.txt)."),
    vocab: List[Path] = typer.Option(..., help="Vocabulary file(s) of the gold ids (MEDIC, MeSH TSV, OBO, ...)."),
    model: str = typer.Option(..., help="Encoder to fine-tune: local Hugging Face folder (e.g. a SAP model) or hub name."),
    output: Path = typer.Option(..., help="Output folder: model/, checkpoints/last/, train_log.jsonl, loss.png."),
    vocab_format: str = typer.Option("auto", help="Format of every --vocab."),
    mesh_trees: List[str] = typer.Option([], help="Keep only MeSH descriptors under these tree letters."),
    label: List[str] = typer.Option([], help="Only mentions with these corpus labels (e.g. Disease)."),
    spell_check: Optional[Path] = typer.Option(None, help="misspelling||correction file applied to mentions and names (BioSyn's NCBI list)."),
    remove_punctuation: bool = typer.Option(True, "--remove-punctuation/--keep-punctuation", help="Punctuation to spaces in mentions and names (BioSyn); build the pipeline with the same."),
    pooling: Optional[str] = typer.Option(None, help="cls (SapBERT) or mean. Default: what the model folder declares (sentence-transformers' 1_Pooling), else cls."),
    max_length: int = typer.Option(25, help="Word pieces per mention or name."),
    batch_size: int = typer.Option(32, help="Mentions per step."),
    hard_negatives: int = typer.Option(4, help="Hard negatives per mention (p), mined every epoch."),
    temperature: float = typer.Option(0.01, help="InfoNCE temperature."),
    lr: float = typer.Option(2e-5, help="AdamW learning rate."),
    weight_decay: float = typer.Option(0.01, help="AdamW weight decay."),
    epochs: int = typer.Option(3, help="Epochs; the name index and the hard negatives are rebuilt at the start of each."),
    seed: int = typer.Option(42, help="Seed of the data order and of dropout."),
    device: str = typer.Option("auto", help="auto (CUDA when present), cpu or cuda."),
    progress: bool = typer.Option(True, help="Show progress bars."),
    resume: bool = typer.Option(False, help="Continue after the last finished epoch (output/checkpoints/last)."),
    overwrite: bool = typer.Option(False, help="Start again in OUTPUT when it holds an earlier run (its files are replaced)."),
) -> None:
    """Fine-tune an encoder on annotated mentions with InfoNCE and dynamic hard negatives (kNN-BioEL)."""
    from ..encoder import default_pooling
    from .dhns import DhnsConfig, train_dhns

    config = DhnsConfig(
        model=model, output=str(output), corpora=[str(c) for c in corpora], vocab=[str(v) for v in vocab],
        vocab_format=vocab_format, mesh_trees=list(mesh_trees), labels=list(label),
        spell_check=str(spell_check) if spell_check else None, remove_punctuation=remove_punctuation, pooling=pooling or default_pooling(model), max_length=max_length,
        batch_size=batch_size, hard_negatives=hard_negatives, temperature=temperature, lr=lr,
        weight_decay=weight_decay, epochs=epochs, seed=seed, device=device, progress=progress,
    )
    _claim_run_output(output, resume, overwrite)
    model_dir = train_dhns(config, resume=resume)
    typer.echo(f"model written to {model_dir}", err=True)


def register(app: typer.Typer) -> None:
    """Add the extract, pairs, train and train-dhns commands to `app`."""
    app.command("extract")(extract_command)
    app.command("pairs")(pairs_command)
    app.command("train")(train_command)
    app.command("train-dhns")(train_dhns_command)
