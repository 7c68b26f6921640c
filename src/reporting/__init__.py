"""Sweep reports: read a sweep's run directories, group them into variants, summarise and compare
them across seeds, and write report.md / report.csv / runs.csv / plots (``python -m
src.report``)."""
