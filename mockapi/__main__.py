import sys

from mockapi.serve.cli import main

sys.exit(main())
