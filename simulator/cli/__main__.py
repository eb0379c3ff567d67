"""python -m simulator.cli"""
import sys

from . import main

sys.exit(main())
