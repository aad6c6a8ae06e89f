"""The S3 gateway: see README "S3"."""
