"""Provenance that cannot lie: a hub-pinned reader pointed at a local folder is also pinned
by that folder's content, so other weights can never pass for the pinned revision."""
from __future__ import annotations

import shutil

from safetensors.torch import load_file, save_file

from readers.models import HubModel


def test_local_weights_under_a_hub_pin_are_pinned_by_content(tmp_path, tiny_model_dir):
    copy, changed = tmp_path / "copy", tmp_path / "changed"
    shutil.copytree(tiny_model_dir, copy)
    shutil.copytree(tiny_model_dir, changed)
    weights = load_file(changed / "model.safetensors")
    name = sorted(weights)[0]
    weights[name] = weights[name] + 1.0
    save_file(weights, changed / "model.safetensors", metadata={"format": "pt"})

    def pin(folder):
        return HubModel("Qwen/Qwen3.5-4B", "851bf6e806efd8d0a36b00ddf55e13ccb7b8cd0a", local_path=str(folder)).pin

    assert pin(copy) == pin(tiny_model_dir)  # a moved or copied folder keeps its identity
    assert pin(changed) != pin(tiny_model_dir)  # other weights do not pass for the revision
    assert pin(changed)["repo"] == "Qwen/Qwen3.5-4B" and len(pin(changed)["local_sha256"]) == 64
    assert HubModel("Qwen/Qwen3.5-4B", "851bf6e").pin == {"repo": "Qwen/Qwen3.5-4B", "revision": "851bf6e"}
