"""``python -m webhook`` runs the command line."""
import sys

from webhook.cli import main

sys.exit(main())
