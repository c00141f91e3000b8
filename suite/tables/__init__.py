"""Per-experiment text tables: ``suite/tables/<experiment>.py`` defines
``format_tables(records) -> str`` for the records whose ``experiment`` field
matches the module name. ``suite.report.format_tables`` dispatches here and
falls back to a generic table. Formatters read records only; they never measure.
"""
