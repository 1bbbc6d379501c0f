"""What the scheduler holds of the cluster: the cache of parsed objects, and what is derived from it and kept beside it."""
