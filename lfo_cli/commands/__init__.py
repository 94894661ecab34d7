"""One module per CLI command. Modules import only typer/stdlib at top level: heavy libraries
(torch, transformers, trl, pandas, matplotlib) are imported inside the command body so that
``lfo --help`` stays fast."""
