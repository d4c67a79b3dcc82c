"""What `bertlab embed` may choose: the poolings, the file formats and the pair separator.

Declared without torch so that `bertlab embed --help` and the server's schemas list them fast;
`bertlab.use.features` computes what they name.
"""

# What one row of the features is: the one vocabulary of `bertlab embed`, `PretrainedBert.embed`
# and the server's embed. Per piece: every piece, [CLS] and [SEP] included (Google's
# extract_features.py). Per word (words as BERT's basic tokenizer splits them): its first piece
# (what BERT's tagger reads, Sec. 4.3) or the mean of its pieces. Per text: [CLS], the mean of
# every piece, the last real piece (what a left-to-right model's sentence heads read), or the
# pooler's tanh output over the last layer's [CLS] (BERT's sentence vector for classification).
POOLINGS = ("pieces", "first", "mean-pieces", "cls", "mean", "last", "pooler")
PER_TEXT = ("cls", "mean", "last", "pooler")
# A left-to-right model's first token has seen only itself: its [CLS] (and the pooler that reads
# it) is the same for every text. Its sentence vector is the last real token's (GPT, Sec. 3.3).
CAUSAL_REFUSED_POOLINGS = ("cls", "pooler")
FORMATS = ("npy", "safetensors")
PAIR_SEPARATOR = " ||| "  # Google's extract_features.py: "text_a ||| text_b" on one line
