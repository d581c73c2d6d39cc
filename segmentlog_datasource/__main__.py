"""`python -m segmentlog_datasource ...` runs the `segmentlog` command line."""
from segmentlog_datasource.cli import main

if __name__ == "__main__":
    main(prog_name="segmentlog")
