#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")
    if sys.argv[1:2] == ["serve"]:
        # `serve` reads settings and starts processes that each set Django up: without
        # django.setup() here (1.3-1.7 s) its servers start that much sooner after a restart.
        from apps.core.management.commands.serve import Command

        Command().run_from_argv(sys.argv)
        return
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
