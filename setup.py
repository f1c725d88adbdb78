"""Builds the optional native nvidia-smi reader; all other metadata is in pyproject.toml.

``optional=True``: where no C compiler is found the install still succeeds, and the smi
ingest uses its DuckDB reader (:mod:`pipeline.ingest.smi_native`): same results, slower.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("pipeline.ingest._smiscan", ["pipeline/ingest/_smiscan.c"], optional=True),
])
