#!/bin/sh
# Runs mix_oracle.py with the bench venv's Python, or reports SKIP (exit 77, ctest's
# SKIP_RETURN_CODE) naming the reason when that venv is missing: the test is then shown as not
# run, never as passed. Usage: run_oracle.sh <python> <mix_oracle.py> <driver> <mix.so>
python=$1
if [ ! -x "$python" ]; then
  echo "SKIP: $python not found; run scripts/bench_setup to create .venv-bench (torch 2.14.1 + torchvision 0.29.1)"
  exit 77
fi
exec "$python" "$2" "$3" "$4"
