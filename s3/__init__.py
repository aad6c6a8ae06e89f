"""The S3 gateway: see docs/s3.md."""
