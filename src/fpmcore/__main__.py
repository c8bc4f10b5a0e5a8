"""``python -m fpmcore`` is ``fpm``."""

from fpmcore.cli import run

if __name__ == "__main__":
    run()
