"""An installable wheel of a saved pipeline, built by `spacy package` in a fresh folder each time.

`spacy package --force` over its earlier package folder keeps setuptools' build/lib of the earlier build, and the
new wheel then carries files the pipeline no longer has (an audit: a re-ranker/ folder that the linker loads, so
the wheel linked otherwise than its folder). Here each build starts empty and only the wheel is kept.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import srsly

from .errors import SapbertError
from .outputs import OutputExistsError, new_tmp_dir


def wheel_name(lang: str, name: str, version: str) -> str:
    """The file name `spacy package` gives the wheel of package `lang`_`name` at `version`."""
    return re.sub("_+", "_", f"{lang}_{name}-{version}") + "-py3-none-any.whl"


def build_wheel(pipeline: Path, output_dir: Path, name: str, version: str, overwrite: bool = False) -> Path:
    """Package `pipeline` as a wheel into `output_dir` (atomically) and return its path; an existing wheel of that
    name is replaced only with `overwrite`."""
    from spacy.cli.package import package

    meta_file = Path(pipeline) / "meta.json"
    if not (Path(pipeline) / "config.cfg").is_file() or not meta_file.is_file():
        raise SapbertError(f"{pipeline}: not a saved pipeline (no config.cfg and meta.json)")
    lang = srsly.read_json(meta_file).get("lang")
    if not lang:
        raise SapbertError(f"{meta_file}: no `lang`")
    wheel = Path(output_dir) / wheel_name(lang, name, version)
    if wheel.exists() and not overwrite:
        raise OutputExistsError(f"the wheel {wheel} exists; pass --overwrite to replace it")
    build = new_tmp_dir(wheel)
    try:
        package(Path(pipeline), build, name=name, version=version, create_sdist=False, create_wheel=True, silent=True)
        built = build / f"{lang}_{name}-{version}" / "dist" / wheel.name
        if not built.is_file():
            raise SapbertError(f"spacy package wrote no {built.name} (see its messages above)")
        os.replace(built, wheel)
    finally:
        shutil.rmtree(build, ignore_errors=True)  # this call's own folder
    return wheel
