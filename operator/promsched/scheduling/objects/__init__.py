"""The API objects the scheduler reads, parsed once each: pods, nodes, volumes, selectors, quantities."""
