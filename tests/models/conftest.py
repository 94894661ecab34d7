"""Fixtures for the model tests: a small world on disk and a tiny tokenizer/model built locally."""

from __future__ import annotations

import pytest

from lfo_cli.models.micro import MicroArch, TokenizerSpec

# Small enough that the whole tests/models suite stays well under a few minutes on 2 cores.
TINY_TOKENIZER = TokenizerSpec(vocab_size=3600, corpus_world_seeds=(7,), corpus_companies=12, corpus_tasks=16)  # 2,220 digit groups
TINY_ARCH = MicroArch(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                      head_dim=16, intermediate_size=64, max_position_embeddings=2048, induction_init=False)


@pytest.fixture(scope="session")
def tiny_corpus():
    from lfo_cli.models import micro

    return list(micro.environment_corpus(TINY_TOKENIZER))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_corpus):
    from lfo_cli.models import micro

    return micro.train_tokenizer(tiny_corpus, TINY_TOKENIZER, extra_tokens=micro.boilerplate_tokens())


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer):
    """A tiny random Qwen3 checkpoint + tokenizer saved as a local path (the pass-through route)."""
    from lfo_cli.models import micro

    path = tmp_path_factory.mktemp("tiny_model")
    model = micro.init_model(tiny_tokenizer, TINY_ARCH)
    model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def small_world_dir(tmp_path_factory):
    from lfo_cli.env.generate import generate_world
    from lfo_cli.env.world_files import write_world

    path = tmp_path_factory.mktemp("world")
    write_world(generate_world(num_companies=12, num_train_tasks=20, num_val_tasks=10, heldout_fraction=0.25, seed=3),
                path, force=True)
    return path


@pytest.fixture(scope="session")
def tiny_specs():
    return TINY_TOKENIZER, TINY_ARCH
