"""``python -m attnlab``: the command line (:mod:`attnlab.app.cli`), where the ``attnlab`` script is not on PATH."""

from attnlab.app.cli import console_main

if __name__ == "__main__":
    console_main()
