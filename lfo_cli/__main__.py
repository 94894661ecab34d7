from lfo_cli.cli import main

main()
