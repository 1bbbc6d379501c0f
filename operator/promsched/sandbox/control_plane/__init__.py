"""A running sandbox: its files and endpoints, its PKI, and its processes."""
