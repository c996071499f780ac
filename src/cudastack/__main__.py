import sys

from cudastack.cli import main

sys.exit(main())
