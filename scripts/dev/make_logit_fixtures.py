#!/usr/bin/env python3
"""Reference logits from Hugging Face transformers for tests/engine/model/test_model_logits.cpp.

For each fixture below, generates a tiny test model with the project's own CLI
(`zipmoe make-model --family F --preset tiny --seed S`, or `--config` with the preset's config.json
plus a few changed fields), loads it with transformers in float32 and in bfloat16 (eager attention),
runs the fixed prompt through it and then the fixed decode tokens one at a time through the KV cache,
and records the logits of the last PROMPT_ROWS prompt positions and of every decode step.

Written per fixture into tests/fixtures/logits/:
  NAME.json      the generation parameters (family, preset, seed, sigma, config overrides), the
                 tokens, the recorded positions and the transformers / torch versions
  NAME.f32.bin   float32 little-endian [rows, vocab] logits of the float32 run
  NAME.bf16.bin  the same for the bfloat16 run (logits upcast to float32)
The weights are not stored: the C++ test regenerates the identical model with
zipmoe::generateSyntheticModel (deterministic per seed and config).

Usage: make_logit_fixtures.py --zipmoe build/app/zipmoe [--out tests/fixtures/logits]
Needs torch, transformers and safetensors (a venv outside the repository).
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

SIGMA = 0.02
PROMPT = [5, 71, 300, 12, 499, 256, 33, 128, 77, 410, 9, 200]
DECODE = [64, 311, 7]
PROMPT_ROWS = 4  # the last prompt positions whose logits are recorded

FIXTURES = [
    {"name": "mixtral", "family": "mixtral", "seed": 11, "overrides": {}},
    {"name": "qwen2_moe", "family": "qwen2_moe", "seed": 12, "overrides": {}},
    # a dense layer between MoE layers (mlp_only_layers) and renormalised top-k weights
    {"name": "qwen2_moe_mlp_only", "family": "qwen2_moe", "seed": 13,
     "overrides": {"num_hidden_layers": 3, "max_window_layers": 3, "mlp_only_layers": [1], "norm_topk_prob": True}},
    {"name": "qwen3_moe", "family": "qwen3_moe", "seed": 14, "overrides": {}},
    {"name": "olmoe", "family": "olmoe", "seed": 15, "overrides": {}},
    # clip_qkv active (the tiny model's q/k/v exceed 0.5) and renormalised top-k weights
    {"name": "olmoe_clip", "family": "olmoe", "seed": 16, "overrides": {"clip_qkv": 0.5, "norm_topk_prob": True}},
    {"name": "deepseek_v2", "family": "deepseek_v2", "seed": 17, "overrides": {}},
    # low-rank queries, group-limited routing, top-3, a routed scaling factor
    {"name": "deepseek_v2_grouped", "family": "deepseek_v2", "seed": 18,
     "overrides": {"q_lora_rank": 32, "topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2,
                   "num_experts_per_tok": 3, "routed_scaling_factor": 2.5}},
]


def make_model(zipmoe, fixture, work):
    base = work / (fixture["name"] + "-base")
    subprocess.run([zipmoe, "make-model", "--family", fixture["family"], "--preset", "tiny",
                    "--seed", str(fixture["seed"]), str(base)], check=True, stdout=subprocess.DEVNULL)
    if not fixture["overrides"]:
        return base
    config = json.loads((base / "config.json").read_text())
    config.update(fixture["overrides"])
    config_path = work / (fixture["name"] + "-config.json")
    config_path.write_text(json.dumps(config, indent=2))
    out = work / fixture["name"]
    subprocess.run([zipmoe, "make-model", "--family", fixture["family"], "--config", str(config_path),
                    "--seed", str(fixture["seed"]), str(out)], check=True, stdout=subprocess.DEVNULL)
    return out


@torch.no_grad()
def reference_logits(model_dir, dtype):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager")
    model.eval()
    out = model(torch.tensor([PROMPT]), use_cache=True)
    rows = [out.logits[0, -PROMPT_ROWS:].float()]
    past = out.past_key_values
    for token in DECODE:
        out = model(torch.tensor([[token]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        rows.append(out.logits[0, -1:].float())
    return torch.cat(rows).numpy().astype("<f4")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zipmoe", required=True, help="path of the built zipmoe CLI")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "tests/fixtures/logits"))
    parser.add_argument("--only", nargs="*", help="fixture names to regenerate")
    args = parser.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        for fixture in FIXTURES:
            if args.only and fixture["name"] not in args.only:
                continue
            model_dir = make_model(args.zipmoe, fixture, Path(tmp))
            f32 = reference_logits(model_dir, torch.float32)
            bf16 = reference_logits(model_dir, torch.bfloat16)
            (out_dir / (fixture["name"] + ".f32.bin")).write_bytes(f32.tobytes())
            (out_dir / (fixture["name"] + ".bf16.bin")).write_bytes(bf16.tobytes())
            meta = {
                "family": fixture["family"], "preset": "tiny", "seed": fixture["seed"], "sigma": SIGMA,
                "overrides": fixture["overrides"], "prompt": PROMPT, "decode": DECODE,
                "prompt_rows": PROMPT_ROWS, "rows": int(f32.shape[0]), "vocab": int(f32.shape[1]),
                "float32": fixture["name"] + ".f32.bin", "bfloat16": fixture["name"] + ".bf16.bin",
                "generator": {"transformers": transformers.__version__, "torch": torch.__version__},
            }
            (out_dir / (fixture["name"] + ".json")).write_text(json.dumps(meta, indent=2) + "\n")
            diff = float(np.abs(f32 - bf16).max())
            print(f"{fixture['name']}: {f32.shape[0]} rows, |logits| max {np.abs(f32).max():.4f}, "
                  f"bf16 vs f32 max diff {diff:.4f}", file=sys.stderr)


if __name__ == "__main__":
    main()
