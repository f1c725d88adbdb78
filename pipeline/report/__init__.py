"""The report stage: the procurement report (HTML + XLSX), the predicted-failure exports and
the Prometheus textfile.

:func:`pipeline.report.build.build_report` draws the report, :mod:`pipeline.report.stage` is
the nightly stage, :mod:`pipeline.report.commands` the CLI. Nothing is imported here, so that
``fleetfault --help`` does not pay for matplotlib.
"""
