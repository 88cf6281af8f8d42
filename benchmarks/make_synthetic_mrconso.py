"""Write a synthetic UMLS MRCONSO.RRF (and optionally MRSTY.RRF, MRREL.RRF) of N rows for benchmarks.

The rows have the real 18-column layout with the trailing "|", are sorted by CUI, and have a few names
per CUI (1-12, some differing only in case), about 15% non-English rows (LAT FRE/SPA/GER) and about 5%
suppressed rows (SUPPRESS O/E/Y). MRSTY gives each CUI one or two TUIs; MRREL relates about 2% of the
CUIs to a trade-name partner (RELA has_tradename / tradename_of, both directions, 16 columns). Written
streaming, so any N fits in memory; a full-size UMLS is about 15 million MRCONSO rows.

Usage: python benchmarks/make_synthetic_mrconso.py OUT_DIR --rows 200000 [--seed 0] [--no-extras]
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path

SYLLABLES = (
    "ab", "ac", "ad", "al", "am", "an", "ar", "at", "bi", "bra", "car", "cer", "chol", "cor", "cyt", "de",
    "derm", "di", "dys", "en", "epi", "gas", "glu", "hem", "hep", "hyp", "im", "in", "ker", "lip", "lys",
    "mal", "mel", "my", "neo", "neph", "neu", "ost", "pan", "path", "per", "phag", "pro", "pul", "ren",
    "sar", "scl", "ter", "thro", "tox", "tri", "ur", "vas", "ven",
)
SUFFIXES = ("itis", "oma", "osis", "emia", "pathy", "algia", "ine", "ase", "ol", "ide", "ate", "al", "ic")
HEADS = ("disease", "syndrome", "disorder", "deficiency", "carcinoma", "infection", "tablet", "injection", "protein", "gene")
SOURCES = ("MSH", "SNOMEDCT_US", "NCI", "RXNORM", "MDR", "ICD10CM", "MTH", "LNC", "HPO", "OMIM")
TTYS = ("PT", "SY", "ET", "MH", "FN", "PN", "BN", "LLT")
FOREIGN = ("FRE", "SPA", "GER", "DUT", "ITA")
TUIS = ("T047", "T191", "T121", "T109", "T116", "T046", "T184", "T033", "T037", "T200")


def word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) + rng.choice(SUFFIXES)


def concept_names(rng: random.Random, count: int):
    base = f"{word(rng)} {rng.choice(HEADS)}"
    names = [base.capitalize()]
    while len(names) < count:
        kind = rng.random()
        if kind < 0.2:
            names.append(base.upper())  # differs only in case: removed by lowercase dedup
        elif kind < 0.5:
            names.append(f"{base}, {word(rng)}")
        elif kind < 0.7:
            names.append(f"{word(rng)} {base}")
        else:
            names.append(f"{word(rng)} {word(rng)} {rng.choice(HEADS)}")
    return names


def write(out_dir: Path, rows: int, seed: int = 0, extras: bool = True) -> dict:
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    conso = open(out_dir / "MRCONSO.RRF", "w", encoding="utf8", newline="\n")
    sty = open(out_dir / "MRSTY.RRF", "w", encoding="utf8", newline="\n") if extras else None
    rel = open(out_dir / "MRREL.RRF", "w", encoding="utf8", newline="\n") if extras else None
    written = cuis = tradenames = 0
    aui = lui = sui = rui = 0
    previous = None
    try:
        while written < rows:
            cuis += 1
            cui = f"C{cuis:07d}"
            names = concept_names(rng, min(rng.randint(1, 12), rows - written))
            for i, name in enumerate(names):
                aui, lui, sui = aui + 1, lui + (0 if i and name.lower() == names[0].lower() else 1), sui + 1
                lat = "ENG" if rng.random() > 0.15 else rng.choice(FOREIGN)
                suppress = "N" if rng.random() > 0.05 else rng.choice("OEY")
                sab = rng.choice(SOURCES)
                code = f"{sab[:1]}{rng.randint(1000, 999999)}"
                fields = [
                    cui, lat, "P" if i == 0 else "S", f"L{lui:07d}", "PF" if i == 0 else "VO", f"S{sui:07d}",
                    "Y" if i == 0 else "N", f"A{aui:08d}", "", code, "", sab, rng.choice(TTYS), code, name,
                    "0", suppress, "256",
                ]
                conso.write("|".join(fields) + "|\n")
                written += 1
            if sty is not None:
                for tui in sorted(set(rng.choice(TUIS) for _ in range(rng.randint(1, 2)))):
                    sty.write(f"{cui}|{tui}|A1.2.3|Semantic type|AT{cuis:08d}|256|\n")
            if rel is not None and previous is not None and rng.random() < 0.02:
                for cui1, rela, cui2 in ((cui, "has_tradename", previous), (previous, "tradename_of", cui)):
                    rui += 1
                    fields = [cui1, "", "CUI", "RO", cui2, "", "CUI", rela, f"R{rui:08d}", "", "RXNORM", "RXNORM", "", "Y", "N", "256"]
                    rel.write("|".join(fields) + "|\n")
                tradenames += 1
            previous = cui
    finally:
        conso.close()
        if sty is not None:
            sty.close()
        if rel is not None:
            rel.close()
    return {"rows": written, "cuis": cuis, "tradename_pairs": tradenames}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-extras", action="store_true", help="write only MRCONSO.RRF (no MRSTY, MRREL)")
    args = parser.parse_args()
    stats = write(args.out_dir, args.rows, args.seed, extras=not args.no_extras)
    print(f"wrote {stats['rows']:,} MRCONSO rows for {stats['cuis']:,} CUIs ({stats['tradename_pairs']:,} tradename pairs) to {args.out_dir}")


if __name__ == "__main__":
    main()
