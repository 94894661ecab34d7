"""Which checkpoint a resume loads, and one error line for a damaged checkpoint file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from lfo_cli.errors import LfoError
from lfo_cli.train.checkpoints import check_checkpoint, last_complete_checkpoint


def make_checkpoint(root: Path, step: int, complete: bool = True) -> Path:
    ck = root / f"checkpoint-{step}"
    (ck / "policy").mkdir(parents=True)
    save_file({"a": torch.arange(64, dtype=torch.float32).reshape(8, 8)}, ck / "policy" / "adapter_model.safetensors")
    (ck / "policy" / "adapter_config.json").write_text("{}")
    torch.save({"state": {0: {"exp_avg": torch.ones(8)}}}, ck / "optimizer.pt")
    torch.save({"python": 1}, ck / "rng_state.pth")
    if complete:
        (ck / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return ck


def test_the_newest_complete_checkpoint_is_chosen_and_cut_off_ones_removed(tmp_path):
    for step, complete in ((2, True), (10, True), (11, False), (12, False)):
        make_checkpoint(tmp_path, step, complete)
    (tmp_path / "checkpoint-x").mkdir()
    assert last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")  # numeric order, not text order
    assert (tmp_path / "checkpoint-12").exists()
    assert last_complete_checkpoint(tmp_path, discard_incomplete=True) == str(tmp_path / "checkpoint-10")
    assert not (tmp_path / "checkpoint-11").exists() and not (tmp_path / "checkpoint-12").exists()
    assert last_complete_checkpoint(tmp_path / "nothing") is None


@pytest.mark.parametrize("damage", ["trainer_state.json", "optimizer.pt", "rng_state.pth",
                                    "policy/adapter_model.safetensors"])
def test_a_damaged_file_is_one_error_naming_it(tmp_path, damage):
    ck = make_checkpoint(tmp_path, 3)
    check_checkpoint(ck)  # intact: no error
    f = ck / damage
    f.write_bytes(f.read_bytes()[: max(len(f.read_bytes()) - 40, 10)])  # truncated, as by a full disk or bad copy
    with pytest.raises(LfoError) as err:
        check_checkpoint(ck)
    msg = str(err.value)
    assert msg.startswith(f"{f}: corrupt or truncated checkpoint file") and f"delete {ck}" in msg
    assert "\n" not in msg
