"""Executes a notebook through a Jupyter kernel of this interpreter and writes it out with
its new outputs, whether or not a cell failed:

    python run_notebook.py <notebook> <executed notebook>

The kernel's working directory is this process's; its environment is this process's.
Exits 1 when a cell raised (nbclient's CellExecutionError, naming the cell, on stderr).
"""
import os
import sys

import nbclient
import nbformat


def main(source: str, target: str) -> int:
    notebook = nbformat.read(source, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": os.getcwd()}})
    try:
        client.execute()
    finally:
        nbformat.write(notebook, target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
