"""A local control plane of real components: etcd, kube-apiserver, controller-manager, kwok, Prometheus."""
