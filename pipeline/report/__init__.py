"""The report stage: the procurement report (HTML + XLSX), the predicted-failure exports and
the Prometheus textfile. ``stage.run`` is the nightly stage, ``commands`` the CLI."""

from pipeline.report.build import Report, build_report
from pipeline.report.prometheus import write_textfile
from pipeline.report.stage import write_outputs

__all__ = ["Report", "build_report", "write_outputs", "write_textfile"]
