"""Definitions whose long form would change under the word-initials rule (before/after), on real corpora."""
import re, sys
sys.path.insert(0, "/work/main")
from spacy_sapbert import abbreviations as A
from spacy_sapbert.readers.corpora import read_pubtator

def initials_start(short, candidate):
    letters = [ch.lower() for ch in short if ch.isalnum()]
    words = list(re.finditer(r"\S+", candidate))
    for j in range(len(words) - 1, -1, -1):
        initials = []
        for w in words[j:]:
            first = next((ch.lower() for ch in w.group() if ch.isalnum()), None)
            if first is not None:
                initials.append(first)
        if len(initials) > len(letters):
            return None
        if initials == letters:
            return words[j].start()
    return None

changed = total = 0
for path in sys.argv[1:]:
    with open(path, encoding="utf8") as f:
        docs = list(read_pubtator(f)) if False else None
    text = open(path, encoding="utf8").read()
    for block in text.split("\n\n"):
        lines = block.split("\n")
        t = [l.split("|", 2)[2] for l in lines if "|t|" in l[:20]]
        a = [l.split("|", 2)[2] for l in lines if "|a|" in l[:20]]
        if not t:
            continue
        doc = t[0] + " " + (a[0] if a else "")
        for ab in A.find_abbreviations(doc):
            total += 1
            open_at = doc.rfind("(", 0, ab.short_start)
            offset, window = A._window_before(doc, open_at, A.max_long_form_words(ab.short))
            end = len(window.rstrip())
            start = initials_start(ab.short, window[:end])
            if start is not None and offset + start != ab.long_start:
                changed += 1
                print(f"{ab.short:10} | {ab.long!r:50} -> {window[start:end]!r}")
print(changed, "of", total, "definitions change")
