import sys

from mixins.cli import main

sys.exit(main())
