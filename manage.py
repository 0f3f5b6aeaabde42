#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelopt_site.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        settings.INSTALLED_APPS  # noqa: B018 - imports settings.py, which reads the environment
    except ImproperlyConfigured as error:
        # A bad setting read by settings.py itself: its message names the variable and the accepted values.
        sys.exit(f"manage.py: invalid configuration: {error}")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
