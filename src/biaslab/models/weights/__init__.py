"""Model weights on disk, handled file by file, so no stage holds a second copy of a model.

A bf16 checkpoint must stay bf16 and one copy per stage: loading a model with transformers and
``save_pretrained`` again costs the whole model in memory (plus the pages of the file it was mapped
from), and quietly loses the dtype when a float32 default sneaks in. The stages that only *move* or
*patch* weights therefore work on the files:

    files.py    which files make a model directory (weights, config, tokenizer) and copying them
    index.py    the safetensors index of a directory: tensor -> file, dtype, shape, byte range;
                reading rows and overwriting rows in place (the embedding edit)
    convert.py  a different storage dtype, tensor by tensor into bounded shards (``model.dtype``)
"""
