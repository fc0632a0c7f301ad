import sys

from tenure.tools.cli import main

sys.exit(main())
