"""The pinned components, built or installed into the per-user cache; the image and the release."""
