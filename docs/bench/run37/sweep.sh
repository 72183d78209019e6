#!/bin/bash
# Run 37: run 36's budget sweep with the product's defaults (../run36/sweep.sh says what it
# measures) after two reads in flight (sched/executor.h), written here; SITTING=2 for the second
# sitting. Figures: docs/bench/run37/sweep_summary.py → sweep_summary.json.
exec env RUN_DIR=docs/bench/run37 bash "$(dirname "$0")/../run36/sweep.sh"
