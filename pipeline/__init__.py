"""fleetfault: GPU fleet fault records to failure rates and a predicted-failure list.

The package is laid out by stage, in data-flow order (see ``dvc.yaml``)::

    collect -> ingest (inventory, smi, xid, tickets) -> normalize -> link
            -> stats -> predict -> report

Public entry points for notebooks live in :mod:`pipeline.api`.
"""

__version__ = "0.1.0"
