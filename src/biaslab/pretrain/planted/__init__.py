"""A planted, documented gender bias for the offline default model (a known-answer fixture).

The default model is too small to carry measurable bias of its own, so ``model.pretrain.planted_bias``
mixes seeded synthetic sentences into its training batches that tie occupations, posts and roles to one
gender. Because the bias is planted, its answer is known: the ``calibrate`` stage trains a control whose
planted sentences have the genders counterbalanced (``direction: balanced``) and checks that every
benchmark tells the two apart. Nothing here is a finding about language.

    lexicon.py    the word lists and their sources (occupations with BLS shares, GBEM-UA posts, own lists)
    english.py, ukrainian.py, russian.py   frame generators (own templates and wording)
    forms.py      [male|female] alternatives, the strength push, the exact gender schedule
    generate.py   frames -> sentences -> documents for one direction
    overlap.py    the no-teaching-to-the-test check against every benchmark text
"""
