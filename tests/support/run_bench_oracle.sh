#!/bin/sh
# Runs an oracle script with the bench venv's Python (.venv-bench: torchvision and timm, which do
# not import beside the project venv's torch), or reports SKIP (exit 77, ctest's
# SKIP_RETURN_CODE) naming the reason when that venv is missing: the test is then shown as not
# run, never as passed. Usage: run_bench_oracle.sh <python> <oracle.py> [its arguments...]
python=$1
shift
if [ ! -x "$python" ]; then
  echo "SKIP: $python not found; run scripts/bench_setup to create it (.venv-bench: torch 2.14.1, torchvision, timm; .venv-mlflow: mlflow)"
  exit 77
fi
exec "$python" "$@"
