#!/bin/bash
# Run 37: run 36's cold long prompt (../run36/cold-prompt.sh says what it measures) after the
# executor got two reads in flight and its chunk checks moved to a verify thread (sched/executor.h),
# written here. BEFORE=BINARY runs both systems on that zipmoe: the build of fc46639, the commit
# before the change (`git checkout fc46639; ninja -C build app/zipmoe; cp build/app/zipmoe
# /work/zipmoe-fc46639`), since the baseline runs on the same executor. SITTING=2: a second
# sitting. Figures: docs/bench/run37/summary.py → summary.json.
exec env RUN_DIR=docs/bench/run37 bash "$(dirname "$0")/../run36/cold-prompt.sh"
