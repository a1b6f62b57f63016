"""`python3 -m staticify IN.pt -o OUT.pt [options]`: the staticify CLI."""
import sys

from . import main

sys.exit(main())
