"""The `lfo` command line. Keep this module light: it is imported by `lfo --help`.

Each command lives in ``lfo_cli/commands/<name>.py`` and imports the modules that load torch/trl/pandas
inside the command body.
"""

from __future__ import annotations

import typer

from lfo_cli import __version__
from lfo_cli.commands import (
    ablate,
    export,
    gen_env,
    inspect_wm,
    models,
    report,
    train,
    transfer_eval,
    wmil,
)
from lfo_cli.commands._common import error_line
from lfo_cli.errors import LfoError
from lfo_cli.perf import tune_malloc

app = typer.Typer(
    name="lfo",
    help=(
        "lfo (learn from observation): train LLM agents with RL plus a world-model loss, "
        "and measure whether it helps.\n\n"
        "Examples:\n\n"
        "  lfo gen-env --seed 0 --output-dir data/\n\n"
        "  lfo gen-env --check --data-dir data/\n\n"
        "  lfo wmil train --task pattern_echo --steps 10000 --out runs/wmil_echo\n\n"
        "  lfo train --recipe dual_lora_micro --seed 3 --out runs/dual_s3"
    ),
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)

# A command module sets CONTEXT = {} once it is built; until then it accepts any arguments,
# says it is not built yet and exits 2.
_PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def _ctx(module) -> dict:
    return getattr(module, "CONTEXT", _PASSTHROUGH)


app.command("gen-env", context_settings=_ctx(gen_env))(gen_env.gen_env)
app.command("train", context_settings=_ctx(train))(train.train)
app.command("ablate", context_settings=_ctx(ablate))(ablate.ablate)
app.command("inspect-wm", context_settings=_ctx(inspect_wm))(inspect_wm.inspect_wm)
app.command("transfer-eval", context_settings=_ctx(transfer_eval))(transfer_eval.transfer_eval)
app.command("report", context_settings=_ctx(report))(report.report)
app.command("export", context_settings=_ctx(export))(export.export)
app.add_typer(wmil.app, name="wmil")
app.add_typer(models.app, name="models")


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"lfo {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Show the version."),
    verbose: bool = typer.Option(False, "--verbose", help="Show third-party progress bars (weight loading, downloads) "
                                 "and the known third-party warnings lfo hides."),
) -> None:
    """lfo (learn from observation)."""
    import os

    if not verbose:
        # Before transformers is imported (commands import it lazily): huggingface_hub's switch, which
        # transformers reads for its "Loading weights" bars. Training and evaluation bars are lfo's/TRL's own.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        # datasets' per-map bars ("Building labels", "Truncating train dataset", ...) as TRL prepares an SFT set.
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
        import sys

        if "transformers" in sys.modules:  # already imported (e.g. in-process callers): switch it off there
            sys.modules["transformers"].utils.logging.disable_progress_bar()
        if "datasets" in sys.modules:
            sys.modules["datasets"].disable_progress_bars()
        _quiet_known_warnings()


# Third-party warnings lfo's own use triggers and a user cannot act on (shown with --verbose).
KNOWN_WARNINGS = (
    (FutureWarning, r"`is_gradient_checkpointing` is deprecated"),  # transformers, called by TRL/PEFT internals
)


def _quiet_known_warnings() -> None:
    import os
    import warnings

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # TRL's notice that environment_factory is experimental
    for category, message in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


def main() -> None:
    tune_malloc()  # keep freed memory in-process: 1.61x faster CPU SFT steps, benchmarks/malloc_tuning.py
    try:
        app()
    except LfoError as exc:  # last line of defence; commands normally catch this themselves
        error_line(str(exc))
        raise SystemExit(exc.exit_code) from None
