"""`bertlab demo`: pre-train a small BERT on built-in data, fine-tune it against its from-scratch
twin, and show what it learned. `runner.run_demo` runs the steps; `config` holds each language's
recipe; `report` and `rows` write the report from `results.json`.
"""
