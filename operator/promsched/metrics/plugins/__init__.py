"""Scoring plugins: one module per plugin, chosen by name through the registry."""

from promsched.metrics.plugins.interface import ALL_EQUAL_SCORE, INSTANT_COUNTER_WINDOW_SECONDS, Plugin
from promsched.metrics.plugins.registry import BUILTIN_PLUGINS, build_plugin

__all__ = ["ALL_EQUAL_SCORE", "BUILTIN_PLUGINS", "INSTANT_COUNTER_WINDOW_SECONDS", "Plugin", "build_plugin"]
