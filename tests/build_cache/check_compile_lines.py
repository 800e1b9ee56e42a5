#!/usr/bin/env python3
"""Checks that a build tree's compile lines are the same in every checkout (ARCH-22).

CI compiles in a fresh clone at a new path and finds the working checkout's work in ccache only if
every translation unit hashes the same there (cmake/TorchhostCcache.cmake; docs/build.md, "ccache").
ccache rewrites the checkout's paths in the options that name files (-I, -isystem, -include, -o,
-MF, the source) relative to the build directory; it cannot rewrite a path inside any other
argument, such as a -D value, nor one written into a generated unity source. So this fails, naming
the target's source and the argument, when

- an argument other than those options names the checkout or the build tree (apart from
  tests/support/test_paths.cpp, the one file the tests' paths are compiled into, and bench/, which
  CI does not build);
- a unity source (CMake's Unity/unity_*.cxx) includes a file by an absolute path in the checkout,
  when the tree was configured with a CMake that can write them relatively (--unity-relocatable:
  CMake >= 4.0, UNITY_BUILD_RELOCATABLE).

Usage: check_compile_lines.py --build DIR --source DIR [--unity-relocatable]
       check_compile_lines.py --self-test   (the check fails on a tree with each defect)
"""
import argparse
import json
import pathlib
import shlex
import sys
import tempfile

# Options whose file argument ccache rewrites relative to the build directory (base_dir).
PATH_OPTIONS = ("-I", "-isystem", "-iquote", "-idirafter", "-include", "-imacros", "-o", "-MF", "-MT", "-MQ", "-c")
# Sources allowed to carry the checkout's paths: the tests' paths library, and benchmarks CI never builds.
EXEMPT = ("tests/support/test_paths.cpp", "bench/")


def argument_problems(entry, roots, source_dir):
    """The arguments of one compile_commands.json entry that name a root where ccache cannot rewrite it."""
    source = pathlib.Path(entry["file"])
    relative = str(source.relative_to(source_dir)) if source.is_relative_to(source_dir) else str(source)
    if any(relative == exempt or relative.startswith(exempt) for exempt in EXEMPT):
        return []
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    problems = []
    skip_next = False
    for arg in args[1:]:
        if skip_next:
            skip_next = False
            continue
        if arg in PATH_OPTIONS:
            skip_next = True
            continue
        if arg.startswith(PATH_OPTIONS) or arg == entry["file"]:
            continue
        if any(root in arg for root in roots):
            problems.append(f"{relative}: {arg}")
    return problems


def unity_problems(build_dir, source_dir):
    """The #include lines of generated unity sources that name a file of the checkout absolutely."""
    problems = []
    for unity in sorted(u for u in build_dir.rglob("Unity/unity_*") if u.suffix in (".c", ".cxx")):
        for line in unity.read_text().splitlines():
            if line.startswith("#include") and f'"{source_dir}/' in line:
                problems.append(f"{unity.relative_to(build_dir)}: {line}")
    return problems


def check(build_dir, source_dir, unity_relocatable):
    build_dir = pathlib.Path(build_dir).resolve()
    source_dir = pathlib.Path(source_dir).resolve()
    commands = build_dir / "compile_commands.json"
    if not commands.is_file():
        print(f"check_compile_lines: {commands} does not exist (configure with CMAKE_EXPORT_COMPILE_COMMANDS)")
        return 2
    entries = json.loads(commands.read_text())
    roots = sorted({str(source_dir), str(build_dir)})
    problems = [p for entry in entries for p in argument_problems(entry, roots, source_dir)]
    if unity_relocatable:
        problems += unity_problems(build_dir, source_dir)
    if problems:
        print(f"check_compile_lines: {len(problems)} compile input(s) name the checkout where ccache cannot "
              "rewrite it, so CI's fresh clone can never reuse this machine's compiles (ARCH-22). Move the "
              "path out of the compile line (tests: tests/support/test_paths.h):")
        for problem in problems[:40]:
            print(f"  {problem}")
        return 1
    print(f"check_compile_lines: {len(entries)} compile lines free of checkout paths"
          + (", unity sources relative" if unity_relocatable else ""))
    return 0


def self_test():
    """Builds small fake trees with each defect and a clean one; the check must judge each right."""
    with tempfile.TemporaryDirectory() as scratch:
        source = pathlib.Path(scratch) / "checkout"
        build = source / "build"
        (build / "t.dir" / "Unity").mkdir(parents=True)

        def tree(define, unity_include):
            commands = [{"directory": str(build), "file": f"{source}/a.cpp",
                         "command": f"c++ -I{source}/include -isystem {source}/.venv/include {define} "
                                    f"-include {build}/pch.hxx -o a.o -c {source}/a.cpp"},
                        {"directory": str(build), "file": f"{source}/tests/support/test_paths.cpp",
                         "command": f"c++ -DTP_TEST_BUILD_DIR=\"{build}\" -c {source}/tests/support/test_paths.cpp"}]
            (build / "compile_commands.json").write_text(json.dumps(commands))
            (build / "t.dir" / "Unity" / "unity_0_cxx.cxx").write_text(f'#include "{unity_include}"\n')

        cases = [("clean", "-DNAME=1", "src/a.cpp", True, 0),
                 ("a -D naming the checkout", f"-DDATA=\"{source}/data\"", "src/a.cpp", True, 1),
                 ("a -D naming the build tree", f"-DOUT=\"{build}/out\"", "src/a.cpp", True, 1),
                 ("an absolute unity include", "-DNAME=1", f"{source}/src/a.cpp", True, 1),
                 ("an absolute unity include, CMake < 4.0", "-DNAME=1", f"{source}/src/a.cpp", False, 0)]
        failures = 0
        for name, define, include, relocatable, expected in cases:
            tree(define, include)
            got = check(build, source, relocatable)
            if got != expected:
                print(f"self-test: {name}: exit {got}, expected {expected}")
                failures += 1
        print(f"self-test: {len(cases) - failures}/{len(cases)} cases judged right")
        return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build")
    parser.add_argument("--source")
    parser.add_argument("--unity-relocatable", action="store_true")
    parser.add_argument("--self-test", action="store_true")
    options = parser.parse_args()
    if options.self_test:
        return self_test()
    if not options.build or not options.source:
        parser.error("--build and --source are required")
    return check(options.build, options.source, options.unity_relocatable)


if __name__ == "__main__":
    sys.exit(main())
