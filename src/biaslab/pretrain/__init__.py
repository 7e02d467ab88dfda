"""The offline default model (DESIGN §7): a byte-level BPE tokenizer and a small Llama trained here."""
