"""Ingest: raw files (inventory, nvidia-smi logs, kernel logs, ticket exports) into the warehouse.

Each source has its own module; each loads file by file through the warehouse's registry.
"""
