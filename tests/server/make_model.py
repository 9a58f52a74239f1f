"""Write a tiny random-weights Llama and a tokenizer trained here into one directory, with no download:
``python make_model.py DIR`` in the server venv (transformers and tokenizers live there, not in the main venv).

Random weights generate gibberish, which is all the end-to-end test needs: a model sglang loads, captures
and serves. ~450 KB on disk.
"""

import sys
from pathlib import Path

# A few lines of text: enough for a byte-level BPE with every byte in its alphabet (any prompt encodes).
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A capture trace records what a CUDA graph runner did while it captured.",
    "sglang serves language models; this one has random weights and says nothing useful.",
]


def main(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab_size = 1000
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - 2,  # room for the two special tokens below
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(out)

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
    )
    torch.manual_seed(0)  # the same weights every run
    LlamaForCausalLM(config).save_pretrained(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
