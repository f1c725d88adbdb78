"""Builds the optional native scanner; all other metadata is in pyproject.toml.

``optional=True``: where no C compiler is found the install still succeeds, and
:mod:`pipeline.ingest.xid_scan` uses its pure-Python scanner: same results, slower.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("pipeline.ingest._xidscan", ["pipeline/ingest/_xidscan.c"], optional=True),
])
