"""The from-scratch arm of issue 72's Must show 4: a pre-trained LSTM-era folder's network, same
config and tokenizer, its weights drawn anew from the class's own init with one seed.

    python lab/lstm_scratch_folder.py /tmp/m72/elmo/final /tmp/m72/scratch/elmo-s1 1
"""

import shutil
import sys
from pathlib import Path

import torch

from bertlab.network.architectures import folder_architecture

source, out, seed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
model = folder_architecture(source).load_model(source)
torch.manual_seed(seed)
fresh = type(model)(model.config)
out.mkdir(parents=True, exist_ok=True)
fresh.save_pretrained(out)
for path in source.iterdir():
    if path.name not in ("config.json", "model.safetensors", "README.md"):
        shutil.copy(path, out / path.name)
print(out)
