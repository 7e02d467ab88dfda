"""The offline default model (docs/design.md 6): a byte-level BPE tokenizer and a small Llama trained here."""
