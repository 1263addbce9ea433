"""Convert a llama-architecture GGUF into a float32 Hugging Face folder that vLLM on CPU can serve.

Run by ``specperf-build-vllm`` with the Python of vLLM's own virtualenv (it needs torch, transformers, gguf
and accelerate, which the plugin's environment does not have): ``python vllm_convert.py MODEL.gguf OUT_DIR``.
It imports nothing from the plugin.

transformers dequantises the GGUF on load, but ``save_pretrained`` refuses a model it loaded from a quantised
GGUF, so the model is rebuilt from its config and the dequantised weights are loaded into it.
"""

from __future__ import annotations

import sys
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    """Write config, float32 weights, tokenizer (with its chat template) and generation config to ``out``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config.torch_dtype = torch.float32
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    # Tied embeddings may leave lm_head out of one side; anything else means a wrong conversion.
    missing = [k for k in missing if k != "lm_head.weight"]
    unexpected = [k for k in unexpected if k != "lm_head.weight"]
    if missing or unexpected:
        raise SystemExit(f"error: weights do not fit the config (missing {missing[:5]}, unexpected {unexpected[:5]})")
    fresh.tie_weights()
    out.mkdir(parents=True, exist_ok=True)
    fresh.save_pretrained(out, safe_serialization=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    if not getattr(tokenizer, "chat_template", None):
        raise SystemExit(f"error: {gguf} carries no chat template; chat requests would fail, use another GGUF")
    tokenizer.save_pretrained(out)
    print(f"converted {gguf} -> {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python vllm_convert.py MODEL.gguf OUT_DIR")
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
