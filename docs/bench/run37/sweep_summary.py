#!/usr/bin/env python3
"""Run 37's budget sweep (sweep.sh) into sweep_summary.json, by run 36's sweep_summary.py.

    python3 docs/bench/run37/sweep_summary.py"""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.exit(subprocess.call([sys.executable, os.path.join(here, "..", "run36", "sweep_summary.py"), here]))
