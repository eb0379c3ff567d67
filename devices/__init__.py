"""Chip profiles: one YAML file per SoC (files starting with `_` are shared bases).
Loaded and validated by simulator.profile."""
