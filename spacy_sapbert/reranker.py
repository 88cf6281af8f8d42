"""A cross-encoder re-ranker: reads a mention and a candidate concept's names together and scores the pair.

The bi-encoder (the linker's index) ranks concepts by the cosine of separately encoded vectors; the
right concept is often in its top 10 without being first. The re-ranker is a transformer with one
output (transformers' `AutoModelForSequenceClassification`, `num_labels=1`) over the pair
``[CLS] mention [SEP] candidate text [SEP]``, trained (`train-reranker`) to give the gold candidate
the highest score among the bi-encoder's candidates.

The candidate text is the concept's canonical name, then the synonyms most like the mention (by
character-trigram overlap), ``" ; "``-joined, up to `max_names` names: the name that matched is
usually among them and the pair stays short. Mention and names are normalized by the linker's
normalizer, as the index stores them.

The re-ranker's logit is added to the bi-encoder's score divided by `bi_temperature` (when set; 0.1
by default in training, chosen on NCBI-disease dev), so it learns a correction of the bi-encoder's ranking rather than a ranking
from nothing: an untrained head leaves the bi-encoder's order, and a few thousand training mentions
(all a CPU affords) do not have to relearn what the bi-encoder knows. None: the cross-encoder alone.
In a pipeline the logit is first multiplied by the linker's `rerank_weight` (1: as trained). The scores the
re-ranker then corrects are those of the pipeline (a mention memory mixes its votes into them), so the weight
that balances the two is a pipeline's setting, chosen on a dev set (`add-reranker --tune-weight-on`).

With `context_words` (0: off) the mention side is read in its text: the words around it, normalized like
the mention, with the mention bracketed, ``left words [ mention ] right words`` (BLINK's cross-encoder
reads its mentions so). A corpus may link one string to different concepts by its context (BC5CDR
annotates "hepatitis" after a drug as Drug-Induced Liver Injury), which the mention alone cannot show.
Every occurrence is then re-ranked on its own, not once per distinct string; text without a document
(`search_texts` without contexts) is read as a mention with no words around it.

A re-ranker folder holds the Hugging Face model and tokenizer and ``reranker.json``: how pairs are
built (`max_length`, `max_names`, `context_words`), `bi_temperature`, and what it was trained on: the fingerprint of the bi-encoder whose
candidates it learned to re-order and the normalizer's settings. A pipeline with another encoder or
normalizer refuses it at load.

An ensemble (`combine_rerankers`, CLI `combine-rerankers`) is a re-ranker folder whose ``reranker.json`` lists
``members``: subfolders each holding one trained cross-encoder (e.g. the same recipe with other seeds). Its logit
for a pair is the mean of its members' logits. The members must build pairs alike and have learned to re-order
the same bi-encoder's candidates; the pipeline treats the ensemble as one re-ranker.

`backend` says how the re-ranker runs, as the linker's encoder `backend` does for the encoder: torch (float32), or a
bfloat16 (`torch-bf16`, for CPUs with AMX or AVX512-BF16 and for GPUs) or float16 (`torch-fp16`, GPUs) copy of each
member, checked against float32 on probe pairs when it is made. The float32 weights stay the re-ranker's own (what is
saved). Reduced precision rounds the logits, so a few close candidates may swap (BENCHMARKS.md measures how many).
"""
from __future__ import annotations

import contextlib
import json
import re
import shutil
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy
import torch

from .context import MentionInContext
from .encoder import HF_SAVE_FILES, check_max_length, encoder_fingerprint, load_pretrained, resolve_device, same_encoder, save_pretrained
from .errors import IndexFormatError, SapbertError
from .io import atomic_write_text
from .kb import Concept

META_FILE = "reranker.json"
# what Reranker.save writes (save_pretrained's files, per member of an ensemble, and META_FILE)
OWN_FILE = re.compile(rf"^(member-\d+/)?(reranker\.json|{HF_SAVE_FILES})$")
FORMAT_VERSION = 1
ENSEMBLE_FORMAT_VERSION = 2  # a folder with `members`: earlier versions cannot read it and say so
MEMBER_DIR = "member-{}"
NAME_SEPARATOR = " ; "
RERANK_BACKENDS = ("torch", "torch-bf16", "torch-fp16")
# a reduced-precision copy is refused when its logits on the probe pairs (AGREEMENT_PROBES, each with each) move by
# more than this, on average, relative to float32's mean size + 1. Rounding alone gives 0.002 to 0.003 in bfloat16 and
# under 0.001 in float16 (the MiniLM-chain re-rankers, with and without context); overflow (float16: inf, NaN) or a
# model that does not run in that precision gives more
MAX_HALF_LOGIT_ERROR = 0.05
MENTION_BRACKETS = ("[", "]")
CONTEXT_CHARS_PER_WORD = 40  # characters read per context word wanted: a window, not the whole document


def default_max_length(context_words: int) -> int:
    """Word pieces per pair when none is set: 64, and 128 when the mention side carries its context."""
    return 128 if context_words else 64


def trigrams(text: str) -> set:
    """The character trigrams of a string padded with spaces (a short string still has some)."""
    padded = f"  {text} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def candidate_text(query: str, concept: Concept, normalize=str, max_names: int = 4) -> str:
    """The candidate side of a pair: the canonical name, then the synonyms with the most trigrams in
    common with `query` (ties: in vocabulary order), `max_names` names in all, each normalized."""
    names = [normalize(name) for name in concept.names]
    canonical, synonyms = names[0], list(dict.fromkeys(n for n in names[1:] if n and n != names[0]))
    query_grams = trigrams(query)
    scored = sorted(range(len(synonyms)), key=lambda i: -len(query_grams & trigrams(synonyms[i])))
    return NAME_SEPARATOR.join([canonical] + [synonyms[i] for i in scored[: max_names - 1]])


def context_around(where: MentionInContext, words: int) -> Tuple[str, str]:
    """The `words` whitespace-separated words before and after the mention in its text (fewer at the text's ends)."""
    if words <= 0:
        return "", ""
    reach = words * CONTEXT_CHARS_PER_WORD
    window_start = max(0, where.start - reach)
    left = where.text[window_start : where.start].split()
    if window_start > 0 and left and not where.text[window_start - 1].isspace():
        left = left[1:]  # the window began inside a word
    right_end = where.end + reach
    right = where.text[where.end : right_end].split()
    if right_end < len(where.text) and right and not where.text[right_end].isspace():
        right = right[:-1]
    return " ".join(left[-words:]), " ".join(right[:words])


def mention_side(query: str, where: Optional[MentionInContext], words: int, normalize=str) -> str:
    """The first text of a pair: the normalized mention `query`, or with `words` > 0 ``left [ query ] right``, the
    context normalized by `normalize` (none when `where` is None, e.g. a bare string)."""
    if words <= 0:
        return query
    left, right = context_around(where, words) if where is not None else ("", "")
    opening, closing = MENTION_BRACKETS
    return " ".join(part for part in (normalize(left), opening, query, closing, normalize(right)) if part)


def pair_truncations(tokenizer, queries: Sequence[str], max_length: int) -> List[str]:
    """How each pair is cut to `max_length` word pieces: in its candidate text only ("only_second"), unless its
    query alone leaves the text no room (a long chemical name), which "only_second" cannot cut: then "longest_first"."""
    room = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    distinct = sorted(set(queries))
    lengths = dict(zip(distinct, (len(ids) for ids in tokenizer(distinct, add_special_tokens=False)["input_ids"]))) if distinct else {}
    return ["only_second" if lengths[query] < room else "longest_first" for query in queries]


def pair_logits(model, tokenizer, queries: Sequence[str], texts: Sequence[str], max_length: int, device) -> torch.Tensor:
    """One logit per (query, text) pair through `model` (a re-ranker's, or one being trained), each pair cut as
    `pair_truncations` says, so that its logit does not depend on the pairs beside it in the batch."""
    truncations = pair_truncations(tokenizer, queries, max_length)
    groups = {kind: [i for i, each in enumerate(truncations) if each == kind] for kind in dict.fromkeys(truncations)}
    logits = []
    for kind, rows in groups.items():
        batch = tokenizer([queries[i] for i in rows], [texts[i] for i in rows], truncation=kind, max_length=max_length,
                          padding=True, return_tensors="pt").to(device)
        logits.append(model(**batch).logits.squeeze(-1))
    if len(groups) == 1:
        return logits[0]
    grouped_rows = torch.tensor([i for rows in groups.values() for i in rows], device=logits[0].device)
    return torch.cat(logits)[torch.argsort(grouped_rows)]  # back in the order of the pairs


class Reranker:
    """A cross-encoder from a folder or hub name; `score` gives one logit per (query, candidate text) pair."""

    def __init__(
        self,
        model: Union[str, Path],
        *,
        device: str = "auto",
        batch_size: int = 64,
        max_length: Optional[int] = None,
        max_names: Optional[int] = None,
        local_files_only: bool = False,
        backend: str = "torch",
    ):
        from transformers import AutoModelForSequenceClassification

        check_rerank_backend(backend, "re-ranker backend")

        self.name = str(model)
        self.meta: Dict[str, Any] = read_meta(Path(self.name)) if Path(self.name).is_dir() else {}
        recorded = shared_settings(self.meta)
        self.context_words: int = recorded["context_words"]
        self.max_length = int(max_length or recorded["max_length"])
        self.max_names = int(max_names or recorded["max_names"])
        self.bi_temperature: Optional[float] = recorded["bi_temperature"]
        self.batch_size = batch_size
        self.device = resolve_device(device)
        member_folders = [str(Path(self.name) / member) for member in self.meta.get("members", [])] or [self.name]
        self.members = [
            load_pretrained(
                folder, local_files_only=local_files_only, model_class=AutoModelForSequenceClassification, role="re-ranker", num_labels=1
            )
            for folder in member_folders
        ]
        check_member_weights(self.name, self.meta, self.members)
        for folder, (_, model) in zip(member_folders, self.members):
            check_max_length(model, self.max_length, f"the re-ranker {folder}")
            model.to(self.device)
            model.eval()
        self.tokenizer = self.members[0][0]
        self.head_trained = all(has_classifier_head(model) for _, model in self.members)
        self.backend = backend
        self.runtime = self.members if backend == "torch" else [
            (tokenizer, reduced_precision_copy(model, tokenizer, backend, self.max_length)) for tokenizer, model in self.members
        ]  # what scores: the members, or their reduced-precision copies
        self._memo: Optional[Dict[Tuple[str, str], float]] = None

    @property
    def trained_on(self) -> Dict[str, Any]:
        """The bi-encoder fingerprint and normalizer settings it was trained with (empty: untrained)."""
        return dict(self.meta.get("trained_on", {}))

    @contextlib.contextmanager
    def memoized(self) -> Iterator[None]:
        """Inside, each pair is scored once and its logit reused (a tuning loop re-ranks the same candidates)."""
        self._memo = {}
        try:
            yield
        finally:
            self._memo = None

    def score(self, pairs: Sequence[Tuple[str, str]]) -> numpy.ndarray:
        """float32 logits, one per (query, candidate text) pair, in order (longest pairs batched together);
        an ensemble's are its members' mean."""
        if self._memo is None:
            return self._score(pairs)
        missing = [pair for pair in dict.fromkeys(pairs) if pair not in self._memo]
        self._memo.update(zip(missing, self._score(missing).tolist()))
        return numpy.asarray([self._memo[pair] for pair in pairs], dtype="float32")

    def _score(self, pairs: Sequence[Tuple[str, str]]) -> numpy.ndarray:
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        scores = numpy.zeros(len(pairs), dtype="float32")
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                rows = order[start : start + self.batch_size]
                queries, texts = [pairs[i][0] for i in rows], [pairs[i][1] for i in rows]
                logits = [
                    pair_logits(model, tokenizer, queries, texts, self.max_length, self.device).float().cpu().numpy()
                    for tokenizer, model in self.runtime
                ]
                scores[rows] = numpy.mean(logits, axis=0)
        return scores

    def save(self, folder: Union[str, Path], trained_on: Optional[Mapping[str, Any]] = None) -> None:
        """The Hugging Face folder (an ensemble: one per member) and reranker.json (`trained_on` replaces the
        recorded one when given)."""
        folder = Path(folder)
        members = [MEMBER_DIR.format(number) for number in range(len(self.members))] if len(self.members) > 1 else []
        for (tokenizer, model), member in zip(self.members, members or [""]):
            save_pretrained(folder / member, model, tokenizer)
        trained_on = trained_on if trained_on is not None else self.trained_on
        write_meta(folder, self.max_length, self.max_names, trained_on, self.bi_temperature, self.context_words, members,
                   weights=[encoder_fingerprint(model, tokenizer) for tokenizer, model in self.members])


def check_member_weights(name: str, meta: Mapping[str, Any], members: Sequence[Tuple[Any, Any]]) -> None:
    """IndexFormatError when the models loaded from a re-ranker folder are not those its reranker.json was written
    with (their encoder_fingerprint: weights, config and tokenizer): another re-ranker's weights copied in scored the
    candidates with no error. A reranker.json of an earlier version records none and checks nothing."""
    recorded = meta.get("weights")
    if not recorded:
        return
    current = [encoder_fingerprint(model, tokenizer) for tokenizer, model in members]
    if len(recorded) != len(current) or not all(same_encoder(was, now) for was, now in zip(recorded, current)):
        raise IndexFormatError(
            f"{name}: the re-ranker's model files are not those its {META_FILE} was written with (fingerprints {recorded}, "
            f"now {current}: weights copied in from another re-ranker?); restore them, or add the re-ranker again (add-reranker)"
        )


def check_rerank_backend(backend: str, name: str) -> None:
    """SapbertError naming `name` (a config key or an option) unless `backend` is one of RERANK_BACKENDS."""
    if backend not in RERANK_BACKENDS:
        raise SapbertError(f"{name} is {backend!r}; choose one of {list(RERANK_BACKENDS)}")


def reduced_precision_copy(model, tokenizer, backend: str, max_length: int):
    """A copy of the float32 cross-encoder `model` in the dtype of `backend`, refused (SapbertError) when its logits
    on probe pairs move by more than MAX_HALF_LOGIT_ERROR; the float32 model is left as it was."""
    from .backends import AGREEMENT_PROBES, half_precision_copy

    device = next(model.parameters()).device
    runtime = half_precision_copy(model, backend, f"re-ranker backend {backend!r}")
    queries = [query for query in AGREEMENT_PROBES for _ in AGREEMENT_PROBES]
    texts = list(AGREEMENT_PROBES) * len(AGREEMENT_PROBES)
    with torch.inference_mode():
        reference = pair_logits(model, tokenizer, queries, texts, max_length, device).float()
        rounded = pair_logits(runtime, tokenizer, queries, texts, max_length, device).float()
    error = float((rounded - reference).abs().mean() / (reference.abs().mean() + 1))
    if not error <= MAX_HALF_LOGIT_ERROR:  # NaN (float16 overflow) fails too
        raise SapbertError(
            f"re-ranker backend {backend!r}: this model's logits move by {error:.3f} of their size from float32's on "
            f"probe pairs (> {MAX_HALF_LOGIT_ERROR}), which would change links; use 'torch'"
        )
    return runtime


def write_meta(
    folder: Path, max_length: int, max_names: int, trained_on: Mapping[str, Any], bi_temperature: Optional[float] = None,
    context_words: int = 0, members: Sequence[str] = (), weights: Sequence[Optional[str]] = (),
) -> None:
    """reranker.json; `members`: an ensemble's member subfolders (none: the folder is the model); `weights`: the
    encoder_fingerprint of each member's model (or of the model), checked at load (`check_member_weights`)."""
    meta = {
        "format_version": ENSEMBLE_FORMAT_VERSION if members else FORMAT_VERSION, "max_length": max_length,
        "max_names": max_names, "context_words": context_words, "bi_temperature": bi_temperature, "trained_on": dict(trained_on),
        **({"members": list(members)} if members else {}),
        **({"weights": list(weights)} if weights and all(weights) else {}),
    }
    atomic_write_text(folder / META_FILE, json.dumps(meta, indent=2) + "\n")


def read_meta(folder: Path) -> Dict[str, Any]:
    """reranker.json of a folder ({} for a plain Hugging Face folder, e.g. the base model to train from)."""
    path = folder / META_FILE
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise IndexFormatError(f"{path}: not a JSON file ({err})") from err
    if meta.get("format_version") not in (FORMAT_VERSION, ENSEMBLE_FORMAT_VERSION):
        raise IndexFormatError(
            f"{path}: format_version {meta.get('format_version')!r}, this spacy-sapbert reads {FORMAT_VERSION} and {ENSEMBLE_FORMAT_VERSION}"
        )
    return meta


def shared_settings(meta: Mapping[str, Any]) -> Dict[str, Any]:
    """What an ensemble's members must share (how pairs are built and what they learned to re-order), from a
    reranker.json as a Reranker reads it: a key an earlier version did not write has the value it meant."""
    context_words = int(meta.get("context_words", 0))
    return {
        "max_length": int(meta.get("max_length") or default_max_length(context_words)), "max_names": int(meta.get("max_names", 4)),
        "context_words": context_words, "bi_temperature": meta.get("bi_temperature"), "trained_on": dict(meta.get("trained_on", {})),
    }


def same_setting(key: str, first: Any, other: Any) -> bool:
    """Whether two members' `shared_settings` values agree: equal, where a fingerprint recorded before the encoder
    fingerprint had its suffix (`same_encoder`) agrees with the same encoder's full one."""
    if key != "trained_on" or first == other:
        return first == other
    one, two = first.get("encoder_fingerprint"), other.get("encoder_fingerprint")
    rest = {k: v for k, v in first.items() if k != "encoder_fingerprint"} == {k: v for k, v in other.items() if k != "encoder_fingerprint"}
    return rest and (same_encoder(one, two) or same_encoder(two, one))


def ensemble_entries(folder: Path) -> Optional[set]:
    """The entries of `folder` as `combine_rerankers` wrote it (reranker.json and the member folders it lists), or
    None when it is not an ensemble (a single re-ranker, a foreign or unreadable folder)."""
    try:
        members = read_meta(Path(folder)).get("members")
    except IndexFormatError:
        return None
    return {META_FILE, *members} if members else None


def combine_rerankers(folders: Sequence[Union[str, Path]], output: Path) -> None:
    """Write `output`, an ensemble of the trained re-rankers in `folders` (model folders of train-reranker):
    their logits are averaged. SapbertError, before anything is written, for a folder that is not a trained
    re-ranker, is an ensemble already, or differs from the first in a `shared_settings` value. The caller checks
    that `output` may be written (`outputs.check_ensemble_output`; it is replaced when it exists)."""
    from .outputs import WRITTEN_RECORD, write_new_dir

    folders = [Path(folder) for folder in folders]
    if len(folders) < 2:
        raise SapbertError("an ensemble needs at least two re-ranker folders")
    twice = next((folder for number, folder in enumerate(folders) if folder.resolve() in {f.resolve() for f in folders[:number]}), None)
    if twice is not None:  # its logit would count twice, at twice the cost
        raise SapbertError(f"{twice} is given twice; an ensemble combines different re-rankers (other seeds)")
    metas = [read_meta(folder) for folder in folders]
    for folder, meta in zip(folders, metas):
        if not meta.get("trained_on"):
            raise SapbertError(f"{folder}: no {META_FILE} of a trained re-ranker; combine the model folders train-reranker wrote")
        if meta.get("members"):
            raise SapbertError(f"{folder}: already an ensemble; combine its members' folders instead")
    settings = [shared_settings(meta) for meta in metas]
    for folder, setting in zip(folders[1:], settings[1:]):
        differing = {key: (value, setting[key]) for key, value in settings[0].items() if not same_setting(key, value, setting[key])}
        if differing:
            raise SapbertError(f"{folder}: its settings differ from {folders[0]}'s, (first, this): {differing}; an ensemble's members must match")

    def fill(tmp: Path) -> None:
        members = [MEMBER_DIR.format(number) for number in range(len(folders))]
        for folder, member in zip(folders, members):
            shutil.copytree(folder, tmp / member, ignore=shutil.ignore_patterns(META_FILE, WRITTEN_RECORD))
        first = settings[0]
        write_meta(tmp, first["max_length"], first["max_names"], first["trained_on"], first["bi_temperature"],
                   first["context_words"], members, weights=[(meta.get("weights") or [None])[0] for meta in metas])

    write_new_dir(output, fill, replace=True)


def has_classifier_head(model) -> bool:
    """Whether `model` was saved as a sequence classifier (its config's architectures say so): loading a base encoder's
    folder (BertModel, MPNetModel) as one gives it a new, random head."""
    return any(name.endswith("ForSequenceClassification") for name in getattr(model.config, "architectures", None) or ())


def check_reranker_head(reranker: Reranker, where: str) -> None:
    """SapbertError when the re-ranker's head is new: the folder is an encoder's, not a re-ranker's."""
    if not reranker.head_trained:
        raise SapbertError(
            f"{where}: {reranker.name} is not a re-ranker: it was saved without a sequence-classification head, so its "
            "scores would be random; pass the model/ folder that train-reranker wrote, or a trained cross-encoder"
        )


# How the linker's encoder made the scores a re-ranker was trained to correct (with a bi_temperature, it adds them):
# recorded in its trained_on beside the fingerprint; a re-ranker saved before they were is not checked for them
BI_ENCODER_SETTINGS = ("pooling", "max_length")


def bi_encoder_record(encoder) -> Dict[str, Any]:
    """What a re-ranker records of the linker's encoder (`trained_on`, with the normalizer's settings)."""
    return {"encoder_fingerprint": encoder.fingerprint, **{key: getattr(encoder, key) for key in BI_ENCODER_SETTINGS}}


def check_trained_on(reranker: Reranker, encoder, normalizer: Mapping[str, Any], where: str) -> None:
    """SapbertError when the re-ranker's head is new (an encoder's folder, not a re-ranker's), or it was trained on
    another bi-encoder's candidates (other weights, pooling or max_length of `encoder`) or other normalized text."""
    check_reranker_head(reranker, where)
    trained = reranker.trained_on
    if not trained:
        return
    if not same_encoder(trained.get("encoder_fingerprint"), encoder.fingerprint):
        raise SapbertError(
            f"{where}: the re-ranker {reranker.name} was trained on the candidates of encoder {trained.get('encoder_fingerprint')}, "
            f"but this linker's encoder is {encoder.fingerprint}; train one for this pipeline (train-reranker)"
        )
    other = {key: (trained[key], getattr(encoder, key)) for key in BI_ENCODER_SETTINGS if key in trained and trained[key] != getattr(encoder, key)}
    if other:
        raise SapbertError(
            f"{where}: the re-ranker {reranker.name} was trained on the candidates of this encoder run otherwise, (trained, here) "
            f"{other}; train one for this pipeline (train-reranker)"
        )
    mismatched = {key: (trained.get("normalizer", {}).get(key), value) for key, value in normalizer.items() if trained.get("normalizer", {}).get(key) != value}
    if mismatched:
        raise SapbertError(f"{where}: the re-ranker {reranker.name} was trained on text normalized otherwise: (trained, here) {mismatched}")


def combined_logits(logits, bi_scores, bi_temperature: Optional[float]):
    """The re-ranker's logits plus the bi-encoder's scores / bi_temperature (the logits alone for None);
    numpy arrays or torch tensors."""
    return logits if bi_temperature is None else logits + bi_scores / bi_temperature


def rerank_hits(
    reranker: Reranker, queries: Sequence[str], hits: Sequence[List[Tuple[str, float]]], concept_of, normalize, k: int,
    contexts: Optional[Sequence[Optional[MentionInContext]]] = None, weight: float = 1.0,
) -> List[List[Tuple[str, float]]]:
    """Each query's first `k` hits re-ordered by the re-ranker's score (sigmoid of `combined_logits` of its
    logits times `weight`, in [0, 1]); hits below the first `k` are left out. `concept_of(id)` gives the Concept
    of a hit; `contexts` (one per query, or None) where each query was written, read when the re-ranker has
    `context_words`. `weight` < 1 leaves more of the linker's order (with a `bi_temperature`)."""
    pairs, owners, bi_scores = [], [], []
    for q, (query, query_hits) in enumerate(zip(queries, hits)):
        side = mention_side(query, contexts[q] if contexts else None, reranker.context_words, normalize)
        for concept_id, bi_score in query_hits[:k]:
            pairs.append((side, candidate_text(query, concept_of(concept_id), normalize, reranker.max_names)))
            owners.append((q, concept_id))
            bi_scores.append(bi_score)
    logits = combined_logits(
        weight * reranker.score(pairs).astype("float64"), numpy.asarray(bi_scores, dtype="float64"), reranker.bi_temperature
    )
    scores = 1.0 / (1.0 + numpy.exp(-logits)) if pairs else numpy.zeros(0)
    ranked: List[List[Tuple[float, str, float]]] = [[] for _ in queries]
    for (q, concept_id), logit, score in zip(owners, logits.tolist(), scores.tolist()):
        ranked[q].append((logit, concept_id, score))
    # ordered by the logit: the sigmoid rounds large logits to the same score (float32 from 17, float64 from 37)
    return [[(concept_id, score) for _, concept_id, score in sorted(query_hits, key=lambda hit: -hit[0])] for query_hits in ranked]
