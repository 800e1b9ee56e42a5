#!/usr/bin/env python3
"""Runs clang-tidy over the given sources, one process per core, skipping a source that this
machine already found clean with the same inputs (scripts/tidy; docs/build.md, "clang-tidy's
result cache").

A source's inputs are everything clang-tidy's verdict depends on: clang-tidy's version, the
checked-in .clang-tidy, the source's compile line, and the text clang++ preprocesses it to with
comments kept (so every included header, and every NOLINT, in it or in a header, is part of it).
The checkout's path is replaced by a placeholder first, as ccache's base_dir does for compiles,
so CI's fresh clone finds what the working checkout checked. Only clean results are recorded: a
source with findings is checked again every time, and prints them.

usage: tidy_cached.py <compile_commands dir> <checkout> <source>...
"""
import concurrent.futures
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path


def compile_lines(build_dir: Path) -> dict:
    import json

    entries = json.loads((build_dir / "compile_commands.json").read_text())
    return {os.path.realpath(e["file"]): e for e in entries}


def preprocess_args(entry: dict) -> list:
    """The compile line as clang++ -E with comments and no line markers (they name paths)."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = ["clang++"], False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg == "-o":
            skip = True
        elif arg != "-c":
            out.append(arg)
    return out + ["-E", "-P", "-C", "-w"]


def inputs_key(entry: dict, checkout: str, fixed: bytes) -> str:
    args = preprocess_args(entry)
    text = subprocess.run(args, cwd=entry["directory"], check=True, capture_output=True).stdout
    digest = hashlib.sha256(fixed)
    digest.update(" ".join(args).replace(checkout, "@").encode())
    digest.update(text.replace(checkout.encode(), b"@"))
    return digest.hexdigest()


def check(source: str, build_dir: Path, entry, checkout: str, fixed: bytes, cache: Path):
    """Returns (source, cached, exit status, output)."""
    key = None
    if entry is not None and cache is not None:
        try:
            key = inputs_key(entry, checkout, fixed)
        except subprocess.CalledProcessError:
            key = None  # clang++ cannot preprocess it: clang-tidy runs and reports why
        if key and (cache / key).exists():
            return source, True, 0, ""
    run = subprocess.run(["clang-tidy", "-p", str(build_dir), "--quiet", source], capture_output=True, text=True)
    output = "".join(line for line in (run.stdout + run.stderr).splitlines(keepends=True)
                     if "warnings generated" not in line)
    if run.returncode == 0 and key and not output.strip():
        (cache / key).touch()
    return source, False, run.returncode, output


def main() -> int:
    build_dir, checkout, sources = Path(sys.argv[1]), os.path.realpath(sys.argv[2]), sys.argv[3:]
    cache = None
    if os.environ.get("TP_TIDY_CACHE", "1") != "0" and shutil.which("clang++"):
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        cache = Path(base) / "torchhost" / "tidy"
        cache.mkdir(parents=True, exist_ok=True)
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, check=True).stdout
    fixed = version + (Path(checkout) / ".clang-tidy").read_bytes()
    lines = compile_lines(build_dir)
    failed, reused = 0, 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        jobs = [pool.submit(check, s, build_dir, lines.get(os.path.realpath(s)), checkout, fixed, cache)
                for s in sources]
        for job in jobs:
            source, cached, status, output = job.result()
            reused += cached
            if output:
                sys.stderr.write(output)
            if status != 0:
                failed += 1
                print(f"tidy: {source}: clang-tidy exited with {status}", file=sys.stderr)
    print(f"tidy: {len(sources)} files, {reused} of them clean with the same inputs before (cache)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
