"""``fpm publish``: a validated, repeatable run becomes the FPM latency table ``fpm replay`` reads (06 R-27)
(:mod:`fpmcore.publish.publication`); the command is :mod:`fpmcore.publish.command`."""
