import sys

from dpopt.cli import main

sys.exit(main())
