"""Shared vocabulary, written once: each module holds one small idea in Python and, where
stages need it in SQL (or polars) too, its twins beside it; tests/test_vocab.py checks on
generated input that the twins agree.

- :mod:`pipeline.vocab.hosts`: the host key (short name, FQDN, IP, case).
- :mod:`pipeline.vocab.pci`: the canonical PCI id (``0000:3b:00.0``) of any spelling.
- :mod:`pipeline.vocab.sql`: SQL literal and identifier quoting; no stage builds a quoted
  string into SQL any other way (a test parses every module for it).
- :mod:`pipeline.vocab.files`: opening a file that may be gzip-compressed (by its magic bytes).
"""
