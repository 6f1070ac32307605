"""The package is declared in setup.cfg; this file lets older tools build it too."""
from setuptools import setup

setup()
