"""`make bench`: promsched side by side with kube-scheduler and a null binder on one sandbox."""
