"""What the scheduler holds of the cluster: the cache of parsed objects, and what is kept beside it."""
