"""An installable wheel of a saved pipeline, built by `spacy package` in a fresh folder each time.

`spacy package --force` over its earlier package folder keeps setuptools' build/lib of the earlier build, and the
new wheel then carries files the pipeline no longer has (an audit: a re-ranker/ folder that the linker loads, so
the wheel linked otherwise than its folder). Here each build starts empty and only the wheel is kept.
"""
from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

from .errors import SapbertError
from .outputs import OutputExistsError, new_tmp_dir


SIGNAL_EXITS = (128 + signal.SIGINT, 128 + signal.SIGTERM)  # the shell's statuses of an interrupted command


def build_wheel(pipeline: Path, output_dir: Path, name: str, version: str, overwrite: bool = False) -> Path:
    """Package `pipeline` as a wheel into `output_dir` (atomically) and return its path; an existing wheel of that
    name is replaced only with `overwrite`. The wheel's name is setuptools' (it normalizes names and versions)."""
    from spacy.cli.package import package

    pipeline, output_dir = Path(pipeline), Path(output_dir)
    meta_file = pipeline / "meta.json"
    if not (pipeline / "config.cfg").is_file() or not meta_file.is_file():
        raise SapbertError(f"{pipeline}: not a saved pipeline (no config.cfg and meta.json)")
    if output_dir.resolve() == pipeline.resolve() or pipeline.resolve() in output_dir.resolve().parents:
        raise SapbertError(f"the wheel's folder {output_dir} is (inside) the pipeline {pipeline}: the package would copy itself; choose another")
    build = new_tmp_dir(output_dir / f"{name}-{version}.whl")
    try:
        try:
            package(pipeline, build, name=name, version=version, create_sdist=False, create_wheel=True, silent=True)
        except SystemExit as err:  # spaCy says why (a name it refuses, ...) and exits
            if err.code in SIGNAL_EXITS:  # Ctrl-C or SIGTERM (cli.exit_on_signals, or the build's own process): not a refusal
                raise
            raise SapbertError(f"spacy package refused {pipeline} as {name!r} {version!r} (its message is above)") from err
        built = sorted(build.glob("*/dist/*.whl"))
        if len(built) != 1:
            raise SapbertError(f"spacy package wrote {len(built)} wheels for {pipeline}, not one (its messages are above)")
        wheel = output_dir / built[0].name
        if wheel.exists() and not overwrite:
            raise OutputExistsError(f"the wheel {wheel} exists; pass --overwrite to replace it")
        os.replace(built[0], wheel)
    finally:
        shutil.rmtree(build, ignore_errors=True)  # this call's own folder
    return wheel
