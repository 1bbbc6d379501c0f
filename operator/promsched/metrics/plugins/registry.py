"""The plugin registry: a built-in plugin name -> its class; any other name is a custom plugin."""

from __future__ import annotations

from collections.abc import Mapping

from promsched.api.builtins import BuiltinPlugin
from promsched.api.plugin_specs import PluginSpec
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.plugins.cpu import CpuPlugin
from promsched.metrics.plugins.custom import CustomPlugin
from promsched.metrics.plugins.diskio import DiskIOPlugin
from promsched.metrics.plugins.diskspace import DiskSpacePlugin
from promsched.metrics.plugins.interface import LoadPlugin, Plugin
from promsched.metrics.plugins.memory import MemoryPlugin
from promsched.metrics.plugins.network import NetworkPlugin

BUILTIN_PLUGINS: Mapping[str, type[LoadPlugin]] = {
    BuiltinPlugin.CPU: CpuPlugin,
    BuiltinPlugin.MEMORY: MemoryPlugin,
    BuiltinPlugin.DISK_IO: DiskIOPlugin,
    BuiltinPlugin.DISK_SPACE: DiskSpacePlugin,
    BuiltinPlugin.NETWORK: NetworkPlugin,
}


def build_plugin(spec: PluginSpec, identity: NodeIdentity) -> Plugin:
    """The plugin for a policy entry, querying nodes as `identity` maps them."""
    plugin_class: type[Plugin] = BUILTIN_PLUGINS.get(spec.name, CustomPlugin)
    return plugin_class(spec, identity)
