#!/usr/bin/env python3
"""Run 37's cold-prompt logs (cold-prompt.sh) into summary.json, by run 36's summary.py ("before" here:
the build of fc46639, both systems).

    python3 docs/bench/run37/summary.py"""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.exit(subprocess.call([sys.executable, os.path.join(here, "..", "run36", "summary.py"), here]))
