"""A tiny but real llama-architecture GGUF for the host's llama.cpp build: random weights, tiny
dimensions, and a real tokenizer (the tokenizer keys of one of the vocab-only GGUF files that
llama.cpp's source ships under models/). llama.cpp loads and runs it like any model, so its
tools print real output in seconds; what it generates is noise.

    python -m phonebench.emulation.llama_model OUT.gguf VOCAB.gguf
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

from phonebench.core.errors import ConfigError

log = logging.getLogger(__name__)

ARCH = "llama"
N_EMBD, N_HEAD, N_LAYER, N_FF, N_CTX = 64, 4, 2, 128, 512
SEED = 20240601


def _tokenizer_fields(vocab: Path) -> dict:
    from gguf import GGUFReader

    try:
        reader = GGUFReader(vocab)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"vocab GGUF {vocab}: {exc}",
                          hint="give one of llama.cpp's models/ggml-vocab-*.gguf files (`make llama` puts one "
                               "beside the build)") from None
    fields = {key: field.contents() for key, field in reader.fields.items() if key.startswith("tokenizer.ggml.")}
    if "tokenizer.ggml.tokens" not in fields:
        raise ConfigError(f"vocab GGUF {vocab}: no tokenizer.ggml.tokens", hint="use a llama.cpp vocab GGUF")
    return fields


def write_tiny_model(out: str | Path, vocab: str | Path, seed: int = SEED) -> Path:
    """Write the model to `out` (replacing it); returns its path."""
    import gguf

    out, vocab = Path(out), Path(vocab)
    fields = _tokenizer_fields(vocab)
    tokens: list[str] = fields["tokenizer.ggml.tokens"]
    n_vocab = len(tokens)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".part")  # written whole, then moved: no half model left behind
    writer = gguf.GGUFWriter(str(partial), ARCH)
    writer.add_name("phonebench-tiny-llama")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model(fields["tokenizer.ggml.model"])
    if "tokenizer.ggml.pre" in fields:
        writer.add_tokenizer_pre(fields["tokenizer.ggml.pre"])
    writer.add_token_list(tokens)
    if "tokenizer.ggml.scores" in fields:
        writer.add_token_scores(fields["tokenizer.ggml.scores"])
    if "tokenizer.ggml.token_type" in fields:
        writer.add_token_types(fields["tokenizer.ggml.token_type"])
    for key, adder in (("bos_token_id", writer.add_bos_token_id), ("eos_token_id", writer.add_eos_token_id),
                       ("unknown_token_id", writer.add_unk_token_id), ("add_bos_token", writer.add_add_bos_token),
                       ("add_eos_token", writer.add_add_eos_token)):
        if f"tokenizer.ggml.{key}" in fields:
            adder(fields[f"tokenizer.ggml.{key}"])

    rng = np.random.default_rng(seed)

    def tensor(name: str, *shape: int, norm: bool = False) -> None:
        # numpy shape is (rows, cols): GGUF's ne is reversed, so (n_vocab, n_embd) is ne = [n_embd, n_vocab]
        data = np.ones(shape, np.float32) if norm else rng.normal(0.0, 0.02, shape).astype(np.float16)
        writer.add_tensor(name, data)

    tensor("token_embd.weight", n_vocab, N_EMBD)
    tensor("output_norm.weight", N_EMBD, norm=True)
    tensor("output.weight", n_vocab, N_EMBD)
    for i in range(N_LAYER):
        tensor(f"blk.{i}.attn_norm.weight", N_EMBD, norm=True)
        for part in ("q", "k", "v", "output"):
            tensor(f"blk.{i}.attn_{part}.weight", N_EMBD, N_EMBD)
        tensor(f"blk.{i}.ffn_norm.weight", N_EMBD, norm=True)
        tensor(f"blk.{i}.ffn_gate.weight", N_FF, N_EMBD)
        tensor(f"blk.{i}.ffn_up.weight", N_FF, N_EMBD)
        tensor(f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(out)
    log.info("tiny llama model (%d tokens, %d layers) written to %s", n_vocab, N_LAYER, out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("vocab")
    args = parser.parse_args(argv)
    write_tiny_model(args.out, args.vocab)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
