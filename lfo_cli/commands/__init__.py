"""One module per CLI command. A command module imports lfo's light modules at top level; a module that
loads a heavy library when imported (torch, transformers, trl, pandas, matplotlib) is imported inside the
command body, so that ``lfo --help`` imports none of them (tests/test_architecture.py counts those imports)."""
