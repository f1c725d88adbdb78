"""Shared vocabulary, written once: each module holds one small idea in Python and, where
stages need it in SQL too, its SQL twin beside it (a property test checks they agree).

- :mod:`pipeline.vocab.hosts`: the host key (short name, FQDN, IP, case).
- :mod:`pipeline.vocab.sql`: SQL literal and identifier quoting; no stage builds a quoted
  string into SQL any other way.
"""
