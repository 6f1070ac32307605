"""Benchmarks: run each as a script (``python bench/NAME.py``); they print their figures."""
