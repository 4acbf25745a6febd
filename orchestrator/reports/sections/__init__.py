"""One module per report section: each derives its rows from results (pure) and returns them as neutral tables
(reports/table.py), which the terminal, Markdown and HTML writers render."""
